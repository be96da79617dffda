package ignition

import (
	"slices"
	"strings"
)

// The drop-ins of kubelet.service and containerd.service may set only the
// directives of dropinDirectives: a list of what may be set rather than of
// what may not, because every directive systemd adds is another way to
// change what the two run (ExecStartPre= rewriting the kubelet's
// configuration, LD_PRELOAD in the environment, a namespace that swaps a
// file). What is listed sizes and restarts the service and routes its
// HTTP through a proxy; nothing listed changes what it runs or reads.

// anySection marks a setting read line by line, without its section.
const anySection = "\x00any"

// A dropinDirective is one directive the drop-ins may set.
type dropinDirective struct {
	section, key string
	why          string // what it is for, for the docs
}

func dropinDirectives() []dropinDirective {
	var out []dropinDirective
	add := func(section, why string, keys ...string) {
		for _, k := range keys {
			out = append(out, dropinDirective{section, k, why})
		}
	}
	add("Unit", "description and restart rate limit", "Description", "Documentation", "StartLimitIntervalSec", "StartLimitBurst")
	add("Service", "CPU and memory limits (systemd.resource-control(5))",
		"CPUAccounting", "CPUWeight", "StartupCPUWeight", "CPUQuota", "CPUQuotaPeriodSec", "AllowedCPUs",
		"MemoryAccounting", "MemoryMin", "MemoryLow", "MemoryHigh", "MemoryMax", "MemorySwapMax",
		"TasksAccounting", "TasksMax", "IOAccounting", "IOWeight")
	add("Service", "process limits and priority (systemd.exec(5))",
		"LimitNOFILE", "LimitNPROC", "LimitMEMLOCK", "LimitCORE", "LimitSTACK", "Nice", "OOMScoreAdjust")
	add("Service", "restarts and timeouts", "Restart", "RestartSec", "TimeoutStartSec", "TimeoutStopSec")
	add("Service", "only "+strings.Join(proxyVariables, ", ")+": the proxy its HTTP requests go through", "Environment")
	return out
}

// proxyVariables are the variables a drop-in may set with Environment=.
// Any other could change how the service runs: LD_PRELOAD, GODEBUG
// (x509sha1=1 accepts SHA-1 certificates), KUBELET_ARGS.
var proxyVariables = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}

const whyNotListed = "only the directives listed in docs/node-config.md (What user-data may change) may be set in its drop-ins (resource limits, restarts, proxy variables); anything else could change what it runs or reads"

// dropinAllowed judges one setting of a kubelet or containerd drop-in; bad
// is true, with what to say, when the allowlist does not have it. A
// setting read without its section (anySection) may be any listed one.
func dropinAllowed(s unitSetting) (checkedKey, bool) {
	key := strings.TrimSpace(s.key)
	listed := slices.ContainsFunc(dropinDirectives(), func(d dropinDirective) bool {
		return d.key == key && (s.section == anySection || (d.section == s.section && !s.outsideSection))
	})
	if !listed {
		return checkedKey{key: key, show: key + "=", why: whyNotListed}, true
	}
	if key != "Environment" {
		return checkedKey{}, false
	}
	v := strings.TrimSpace(s.value)
	if v == "" {
		return checkedKey{key: key, show: "an empty Environment=", why: "it would drop the environment the image's unit sets"}, true
	}
	for rest := v; ; {
		w, r, ok, err := nextWord(rest)
		if err != nil {
			return checkedKey{key: key, show: "Environment=" + v, why: "it cannot be read: " + err.Error()}, true
		}
		if !ok {
			return checkedKey{}, false
		}
		rest = r
		name, _, _ := strings.Cut(w, "=")
		if !slices.Contains(proxyVariables, name) {
			return checkedKey{key: key, show: name + " (Environment=)", why: "only " + strings.Join(proxyVariables, ", ") + " may be set in its environment; another variable (LD_PRELOAD, GODEBUG, …) could change how it runs"}, true
		}
	}
}
