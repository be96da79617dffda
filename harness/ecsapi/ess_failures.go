package ecsapi

import "fmt"

// Scaling activities that fail. ESS launches a group's instances through
// ECS (RunInstances), and when ECS refuses, the scaling activity ends
// Failed (every launch refused) or Warning (some), as
// DescribeScalingActivities documents its StatusCode
// (help/en/auto-scaling/developer-reference/api-describescalingactivities:
// Successful, Warning "partially successful", Failed, InProgress, Rejected
// "the request to trigger the scaling activity is rejected"). The SDK's
// ess.ScalingActivity carries the reason in StatusMessage and, in newer
// API versions, ErrorCode and ErrorMessage (DescribeScalingActivityDetail
// names "the scaling activity status, error code, and error message").
//
// Not documented, and chosen here:
//   - the wording of StatusMessage: the emulator names the ECS error code
//     and message and the zone (statusMessage below);
//   - that ErrorCode/ErrorMessage are the ECS error's code and message:
//     they are here;
//   - how soon ESS tries again to reach the desired capacity after a failed
//     launch: DefaultLaunchRetry (ess.go), each try a scaling activity of its
//     own that fails again while the cause lasts (a desired-capacity group
//     "keeps" its expected number of instances, help/en/auto-scaling/
//     user-guide/expected-number-of-instances);
//   - which requests ESS answers with a Rejected activity rather than an
//     error: here ScaleWithAdjustment that cannot change the capacity (the
//     group is at MaxSize or MinSize already) — its desired capacity stays.

// The ECS errors a launch fails with (RunInstances and CreateInstance error
// tables, help/en/ecs/developer-reference/api-runinstances).
const (
	// NoStock: 403 "The requested resource is sold out in the specified
	// zone; try other types of resources or other regions and zones."
	NoStock = "OperationDenied.NoStock"
	// ElasticQuota: the account's quota of instances (of a type in the
	// region, or of vCPUs in a zone) is used up (CreateInstance's usage
	// notes: "apply for a quota increase" in Quota Center).
	ElasticQuota = "QuotaExceed.ElasticQuota"
)

// launchError is an ECS error that fails a launch.
type launchError struct {
	code, msg string
	zones     []string // the zones a NoStock launch found sold out
}

func (e *launchError) Error() string { return e.code + ": " + e.msg }

// statusMessage is the activity's StatusMessage for a launch in zone that
// ECS refused (the wording is the emulator's; see above).
func (e *launchError) statusMessage(zone string) string {
	return fmt.Sprintf("Fail to create ECS instance in zone %s: Code=%s, Message=%s", e.zoneList(zone), e.code, e.msg)
}

func errNoStock() *launchError {
	return &launchError{code: NoStock, msg: "The requested resource is sold out in the specified zone; try other types of resources or other regions and zones."}
}

func errElasticQuota() *launchError {
	return &launchError{code: ElasticQuota, msg: "The quota of instances in the region is exceeded; apply for a quota increase in Quota Center."}
}

// StockOut makes every launch in zone fail with OperationDenied.NoStock
// while out is true, as when ECS has no capacity of the instance type
// there: each launch's scaling activity fails, and a group whose desired
// capacity is not met keeps trying (and failing) until the stock is back.
func (s *Server) StockOut(zone string, out bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noStock == nil {
		s.noStock = map[string]bool{}
	}
	s.noStock[zone] = out
	s.poke()
}

// SetInstanceQuota limits the instances the account may have in a region
// (0: no limit): a launch beyond it fails with QuotaExceed.ElasticQuota.
func (s *Server) SetInstanceQuota(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quota = n
	s.poke()
}

// regionInstances counts the account's instances in a region, the ones
// being launched included. The caller holds s.mu.
func (s *Server) regionInstances(region string) int {
	n := 0
	for _, in := range s.instances {
		if in.region == region {
			n++
		}
	}
	return n
}
