//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss/credentials"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsapi"
	"github.com/drover-os/drover/harness/standin"
	"github.com/drover-os/drover/nodecontract"
)

const (
	roKeyID    = "LTAIrollouttest"
	roSecret   = "rollout-test-secret"
	roRegion   = "cn-test"
	roBucket   = "drover-images"
	roBuildA   = "aaaa000011112222"
	roBuildB   = "bbbb333344445555"
	labelScene = "example.com/scenario" // which scenario's group a Node belongs to
	labelTier  = "example.com/tier"     // the node-file change of scenario 1
)

// rolloutEnv is one control plane, one emulated cloud whose scaling groups
// launch stand-ins, and two imported images, shared by every scenario; each
// scenario has its own launch template, group and Nodes.
type rolloutEnv struct {
	cluster  *cluster.Cluster
	kc       kubernetes.Interface
	srv      *ecsapi.Server
	eps      ecsapi.Endpoints
	ecs      *ecs.Client
	ess      *ess.Client
	standins *standin.Launcher
	imageA   string
	imageB   string
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRollout runs the real drover rollout against the emulated ECS/ESS
// with stand-in instances and a real control plane (issue 26's Must-show
// lines that stand-ins may cover).
func TestRollout(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	e := &rolloutEnv{}
	var err error
	e.cluster, err = cluster.Start(ctx, cluster.Config{StateDir: t.TempDir(), Version: "v1.37.2", BindAddress: "127.0.0.1",
		CacheDir: filepath.Join(os.TempDir(), "drover-cluster-cache"), Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.cluster.Stop() })
	rc, err := clientcmd.BuildConfigFromFlags("", e.cluster.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	e.kc = kubernetes.NewForConfigOrDie(rc)

	builds := map[string]string{} // image ID → build ID, what a real image's os-release says
	var buildsMu sync.Mutex
	e.standins, err = standin.New(standin.Config{Kubeconfig: e.cluster.AdminKubeconfig(), Heartbeat: 2 * time.Second,
		BuildID: func(id string) string { buildsMu.Lock(); defer buildsMu.Unlock(); return builds[id] }})
	if err != nil {
		t.Fatal(err)
	}
	// ESS's retry of a failed launch after 1 s, not the emulator's
	// conservative 30 s: a scenario that leaves a group wanting more
	// instances than launch (StockOut) then shows it within seconds.
	e.srv = ecsapi.New(ecsapi.Config{AccessKeyID: roKeyID, AccessKeySecret: roSecret, Region: roRegion, Launcher: e.standins,
		LaunchRetry: time.Second})
	t.Cleanup(e.srv.Close) // before the cluster stops: the stand-ins stop first
	if e.eps, err = e.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.srv.CreateBucket(roBucket)
	if e.ecs, err = ecs.NewClientWithAccessKey(roRegion, roKeyID, roSecret); err != nil {
		t.Fatal(err)
	}
	e.ecs.Domain = e.eps.ECS
	if e.ess, err = ess.NewClientWithAccessKey(roRegion, roKeyID, roSecret); err != nil {
		t.Fatal(err)
	}
	e.ess.Domain = e.eps.ESS
	e.imageA, e.imageB = e.importImage(t, roBuildA), e.importImage(t, roBuildB)
	buildsMu.Lock()
	builds[e.imageA], builds[e.imageB] = roBuildA, roBuildB
	buildsMu.Unlock()
	t.Logf("control plane and images ready after %s", time.Since(start).Round(time.Second))

	// Every scenario at once, each in its own goroutine: they wait on the
	// node lifecycle controller's grace period, ESS's activities and the
	// stand-ins' heartbeats, not on the CPU, and t.Parallel would run them
	// only -parallel (GOMAXPROCS: 2 on a CI machine) at a time, which made
	// this test the integration tier's long pole (224 s of its 369 s).
	scenarios := []struct {
		name string
		run  func(*testing.T)
	}{
		{"NodeFileChange", e.nodeFileChange},
		{"RotatedToken", e.rotatedToken},
		{"RefusedUserData", e.refusedUserData},
		{"InterruptedResume", e.interruptedResume},
		{"Repair", e.repair},
		{"SkippedStates", e.skippedStates},
		{"Locked", e.locked},
		{"KilledBeforeMaxSize", e.killedBeforeMaxSize},
		{"NoDesiredCapacity", e.noDesiredCapacity},
		{"StockOut", e.stockOut},
		{"Zones", e.zones},
		{"TemplateCopy", e.templateCopy},
		{"LifecycleHooks", e.lifecycleHooks},
		{"KilledRepair", e.killedRepair},
		{"PDBBlocks", e.pdbBlocks},
		{"MaxUnhealthy", e.maxUnhealthy},
		{"Surge50", e.surge50},
		{"KilledAtEachStep", e.killedAtEachStep},
	}
	t.Run("scenarios", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, sc := range scenarios {
			wg.Go(func() { t.Run(sc.name, sc.run) })
		}
		wg.Wait()
	})
}

// importImage imports an image as drover publish does: an OSS object,
// ImportImage tagged with the build ID, wait until Available.
func (e *rolloutEnv) importImage(t *testing.T, buildID string) string {
	t.Helper()
	o := oss.NewClient(oss.LoadDefaultConfig().WithRegion(roRegion).WithEndpoint(e.eps.OSS).WithDisableSSL(true).WithUsePathStyle(true).
		WithCredentialsProvider(credentials.NewStaticCredentialsProvider(roKeyID, roSecret)))
	key := "drover/ecs-node-" + buildID + ".raw"
	if _, err := o.PutObject(context.Background(), &oss.PutObjectRequest{Bucket: oss.Ptr(roBucket), Key: oss.Ptr(key),
		Body: strings.NewReader("a stand-in image of build " + buildID)}); err != nil {
		t.Fatal(err)
	}
	req := ecs.CreateImportImageRequest()
	req.ImageName, req.Architecture, req.BootMode = "ecs-node-"+buildID, "x86_64", "UEFI"
	req.DiskDeviceMapping = &[]ecs.ImportImageDiskDeviceMapping{{OSSBucket: roBucket, OSSObject: key, Format: "RAW", DiskImageSize: "1"}}
	req.Tag = &[]ecs.ImportImageTag{{Key: "drover:build-id", Value: buildID}}
	resp, err := e.ecs.ImportImage(req)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "image "+resp.ImageId+" Available", time.Minute, func() error {
		d := ecs.CreateDescribeImagesRequest()
		d.ImageId, d.Status = resp.ImageId, "Creating,Available"
		r, err := e.ecs.DescribeImages(d)
		if err != nil {
			return err
		}
		if len(r.Images.Image) != 1 || r.Images.Image[0].Status != "Available" {
			return fmt.Errorf("images %+v", r.Images.Image)
		}
		return nil
	})
	return resp.ImageId
}

// scenario is one group: its pool file, launch template and scaling group.
type scenario struct {
	e        *rolloutEnv
	name     string
	dir      string
	pool     string // pool.yaml
	template string
	group    string
}

// spec is the scenario's pool: the real cluster's server and CA.
func (s *scenario) spec(tier, token string) *userdata.Spec {
	return &userdata.Spec{Server: s.e.cluster.Server(), CAData: string(s.e.cluster.CAPEM()), BootstrapToken: token,
		Labels: map[string]string{labelScene: s.name, labelTier: tier}}
}

// writePool writes sp as pool.yaml and returns the user-data rollout
// renders from it.
func (s *scenario) writePool(t *testing.T, sp *userdata.Spec) []byte {
	t.Helper()
	data, err := yaml.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.pool, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ud, err := userdata.Render(sp)
	if err != nil {
		t.Fatal(err)
	}
	return ud
}

// newScenario creates Terraform's part — a launch template on image A and
// a group of 2 (MaxSize 3) launching from its version 1 — and waits for
// both Nodes.
func (e *rolloutEnv) newScenario(t *testing.T, name string) (*scenario, []string) {
	t.Helper()
	return e.newScenarioWith(t, name, ecsapi.ScalingGroup{MinSize: 2, MaxSize: 3, DesiredCapacity: 2}, 2)
}

// newScenarioWith is newScenario with the group's sizes (and whether it has
// a desired capacity) from g; it waits for size Ready Nodes.
func (e *rolloutEnv) newScenarioWith(t *testing.T, name string, g ecsapi.ScalingGroup, size int) (*scenario, []string) {
	t.Helper()
	return e.newScenarioTemplate(t, name, g, size, nil)
}

// newScenarioTemplate is newScenarioWith whose launch template request
// edit completes (nil: none).
func (e *rolloutEnv) newScenarioTemplate(t *testing.T, name string, g ecsapi.ScalingGroup, size int, edit func(*ecs.CreateLaunchTemplateRequest)) (*scenario, []string) {
	t.Helper()
	s := &scenario{e: e, name: strings.ToLower(name), dir: t.TempDir()}
	s.pool = filepath.Join(s.dir, "pool.yaml")
	ud := s.writePool(t, s.spec("a", e.cluster.BootstrapToken()))
	req := ecs.CreateCreateLaunchTemplateRequest()
	req.LaunchTemplateName, req.ImageId, req.InstanceType = "pool-"+s.name, e.imageA, "ecs.g7.large"
	req.UserData = base64.StdEncoding.EncodeToString(ud)
	if edit != nil {
		edit(req)
	}
	resp, err := e.ecs.CreateLaunchTemplate(req)
	if err != nil {
		t.Fatal(err)
	}
	s.template = resp.LaunchTemplateId
	g.Name, g.LaunchTemplateID, g.LaunchTemplateVersion = s.name, s.template, "1"
	s.group = e.srv.AddScalingGroup(g)
	var ids []string
	waitFor(t, fmt.Sprintf("%d Ready Nodes of group %s", size, s.group), 2*time.Minute+time.Duration(size)*time.Second, func() error {
		ids = nil
		nodes := s.nodesByInstance(t) // one List a look: a group may hold 50
		for _, in := range s.instances(t) {
			n := nodes[in.InstanceId]
			if n == nil || !ready(n) {
				var console []byte
				if si := e.standins.Instance(in.InstanceId); si != nil {
					console = si.Console()
				}
				return fmt.Errorf("instance %s (%s) has no Ready Node; console:\n%s", in.InstanceId, in.LifecycleState, console)
			}
			ids = append(ids, in.InstanceId)
		}
		if len(ids) != size {
			return fmt.Errorf("instances %v", ids)
		}
		return nil
	})
	return s, ids
}

// rollout runs drover rollout on the scenario's group; args follow the
// common ones.
func (s *scenario) rollout(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := s.command(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("drover rollout %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
	return out.String(), errb.String(), code
}

func (s *scenario) command(t *testing.T, args ...string) *exec.Cmd {
	all := append([]string{"rollout", "--region", roRegion, "--scaling-group", s.group, "--kubeconfig", s.e.cluster.AdminKubeconfig(),
		"--poll-interval", "1s", "--drain-timeout", "30s"}, args...)
	cmd := exec.Command(droverBin, all...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"),
		"ALIBABA_CLOUD_ACCESS_KEY_ID=" + roKeyID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET=" + roSecret,
		"ALIBABA_CLOUD_ECS_METADATA_DISABLED=true",
		"DROVER_ECS_ENDPOINT=http://" + s.e.eps.ECS, "DROVER_ESS_ENDPOINT=http://" + s.e.eps.ESS}
	return cmd
}

// instances is DescribeScalingInstances of the group.
func (s *scenario) instances(t *testing.T) []ess.ScalingInstance {
	t.Helper()
	ins, err := s.tryInstances()
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

// tryInstances pages through DescribeScalingInstances (at most 50 a page).
func (s *scenario) tryInstances() ([]ess.ScalingInstance, error) {
	var out []ess.ScalingInstance
	for page := 1; ; page++ {
		req := ess.CreateDescribeScalingInstancesRequest()
		req.ScalingGroupId, req.PageSize, req.PageNumber = s.group, requests.NewInteger(50), requests.NewInteger(page)
		resp, err := s.e.ess.DescribeScalingInstances(req)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.ScalingInstances.ScalingInstance...)
		if len(resp.ScalingInstances.ScalingInstance) == 0 || len(out) >= resp.TotalCount {
			return out, nil
		}
	}
}

func (s *scenario) instanceIDs(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, in := range s.instances(t) {
		ids = append(ids, in.InstanceId)
	}
	return ids
}

func (s *scenario) scalingGroup(t *testing.T) ess.ScalingGroup {
	t.Helper()
	req := ess.CreateDescribeScalingGroupsRequest()
	req.ScalingGroupId = &[]string{s.group}
	resp, err := s.e.ess.DescribeScalingGroups(req)
	if err != nil || len(resp.ScalingGroups.ScalingGroup) != 1 {
		t.Fatalf("DescribeScalingGroups %s: %v %+v", s.group, err, resp)
	}
	return resp.ScalingGroups.ScalingGroup[0]
}

// versions is DescribeLaunchTemplateVersions with details, newest first.
func (s *scenario) versions(t *testing.T) []ecs.LaunchTemplateVersionSet {
	t.Helper()
	req := ecs.CreateDescribeLaunchTemplateVersionsRequest()
	req.LaunchTemplateId, req.DetailFlag, req.PageSize = s.template, requests.NewBoolean(true), requests.NewInteger(50)
	resp, err := s.e.ecs.DescribeLaunchTemplateVersions(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.LaunchTemplateVersionSets.LaunchTemplateVersionSet
}

// activities is DescribeScalingActivities of the group: every launch and
// removal since it was created.
func (s *scenario) activities(t *testing.T) []ess.ScalingActivity {
	t.Helper()
	req := ess.CreateDescribeScalingActivitiesRequest()
	req.ScalingGroupId, req.PageSize = s.group, requests.NewInteger(50)
	resp, err := s.e.ess.DescribeScalingActivities(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ScalingActivities.ScalingActivity
}

// node is the Node whose providerID names the instance (nil: none).
func (s *scenario) node(t *testing.T, id string) *corev1.Node {
	t.Helper()
	for _, n := range s.nodes(t) {
		if n.Spec.ProviderID == nodeconfig.ProviderID(nodeconfig.Facts{RegionID: roRegion, InstanceID: id}) {
			return &n
		}
	}
	return nil
}

// nodesByInstance are the Nodes of the group by the instance ID their
// providerID names.
func (s *scenario) nodesByInstance(t *testing.T) map[string]*corev1.Node {
	t.Helper()
	out := map[string]*corev1.Node{}
	for _, n := range s.nodes(t) {
		if id, ok := strings.CutPrefix(n.Spec.ProviderID, nodeconfig.ProviderID(nodeconfig.Facts{RegionID: roRegion})); ok {
			out[id] = &n
		}
	}
	return out
}

// nodes are the Nodes of the scenario's group, by the pool's label.
func (s *scenario) nodes(t *testing.T) []corev1.Node {
	t.Helper()
	ns, err := s.tryNodes()
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func (s *scenario) tryNodes() ([]corev1.Node, error) {
	l, err := s.e.kc.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: labelScene + "=" + s.name})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func ready(n *corev1.Node) bool {
	return readyStatus(n) == corev1.ConditionTrue
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// serving checks that the instances are in the group with Ready,
// schedulable Nodes carrying the build and the config digest of ud.
func (s *scenario) serving(t *testing.T, ids []string, build string, ud []byte) {
	t.Helper()
	label, err := nodecontract.UserDataLabel(ud)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]string{}
	for _, x := range s.instances(t) {
		in[x.InstanceId] = x.LifecycleState
	}
	for _, id := range ids {
		if in[id] != "InService" {
			t.Errorf("instance %s: lifecycle %q in the group, want InService", id, in[id])
		}
		n := s.node(t, id)
		switch {
		case n == nil:
			t.Errorf("instance %s has no Node", id)
		case !ready(n) || n.Spec.Unschedulable:
			t.Errorf("Node %s: Ready %s, unschedulable %v; want Ready and schedulable", n.Name, readyStatus(n), n.Spec.Unschedulable)
		case n.Labels[nodeconfig.LabelBuildID] != build || n.Labels[nodeconfig.LabelNodeConfig] != label:
			t.Errorf("Node %s: build %q config %q, want %q %q", n.Name, n.Labels[nodeconfig.LabelBuildID], n.Labels[nodeconfig.LabelNodeConfig], build, label)
		}
	}
}

// sampler watches a scenario's group while a rollout runs: the fewest
// Ready schedulable Nodes and the most instances (read after finish). It
// looks after every call on its group the emulator answers (the hook runs
// before the answer is sent, so each state the rollout acts on is seen,
// however loaded the machine) and every 50 ms besides, for changes only
// Kubernetes sees (a cordon).
type sampler struct {
	mu                          sync.Mutex
	minServing, maxIns, atCalls int
	errs                        []error
	remove                      func()
	stop                        chan struct{}
	done                        chan struct{}
}

func (s *scenario) sample() *sampler {
	sm := &sampler{minServing: 1 << 30, stop: make(chan struct{}), done: make(chan struct{})}
	look := func(atCall bool) {
		sm.mu.Lock()
		defer sm.mu.Unlock()
		ns, err := s.tryNodes()
		if err != nil {
			sm.errs = append(sm.errs, err)
			return
		}
		serving := 0
		for _, n := range ns {
			if ready(&n) && !n.Spec.Unschedulable {
				serving++
			}
		}
		sm.minServing, sm.maxIns = min(sm.minServing, serving), max(sm.maxIns, s.e.srv.Members(s.group))
		if atCall {
			sm.atCalls++
		}
	}
	sm.remove = s.e.srv.AfterCall(func(c ecsapi.Call) {
		if c.Params.Get("ScalingGroupId") == s.group { // scenarios run in parallel
			look(true)
		}
	})
	go func() {
		defer close(sm.done)
		for {
			look(false)
			select {
			case <-sm.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return sm
}

// finish stops the sampler; it fails the test if no call of the rollout
// was seen (the figures would then say nothing) or a look failed.
func (sm *sampler) finish(t *testing.T) {
	t.Helper()
	sm.remove()
	close(sm.stop)
	<-sm.done
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if len(sm.errs) > 0 || sm.atCalls == 0 {
		t.Fatalf("sampling the group: %d looks at emulator calls, errors %v", sm.atCalls, sm.errs)
	}
}

// nodeFileChange: a label changed in pool.yaml rolls both nodes one at a
// time; the same pool again is nothing to do.
func (e *rolloutEnv) nodeFileChange(t *testing.T) {
	s, old := e.newScenario(t, "nodefile")
	ud := s.writePool(t, s.spec("b", e.cluster.BootstrapToken()))
	sm := s.sample()
	_, _, code := s.rollout(t, "--image", e.imageA, "--userdata", s.pool, "--ready-timeout", "60s")
	sm.finish(t)
	if code != 0 {
		t.Fatalf("rollout exit %d, want 0", code)
	}
	if sm.minServing < 2 || sm.maxIns > 3 {
		t.Errorf("during the rollout: as few as %d Ready schedulable Nodes (want ≥ 2), as many as %d instances (want ≤ 3, surge 1)", sm.minServing, sm.maxIns)
	}
	now := s.instanceIDs(t)
	if len(now) != 2 || contains(now, old[0]) || contains(now, old[1]) {
		t.Fatalf("instances %v after the rollout, want 2 new ones (old: %v)", now, old)
	}
	s.serving(t, now, roBuildA, ud)
	for _, id := range now {
		if n := s.node(t, id); n != nil && n.Labels[labelTier] != "b" {
			t.Errorf("Node %s: %s=%q, want the pool's new b", n.Name, labelTier, n.Labels[labelTier])
		}
	}
	if n := len(s.nodes(t)); n != 2 {
		t.Errorf("%d Nodes of the group, want 2 (the old ones deleted)", n)
	}
	vs := s.versions(t)
	if len(vs) != 2 || s.scalingGroup(t).LaunchTemplateVersion != "2" {
		t.Fatalf("%d versions, group on %q; want 2 and version 2", len(vs), s.scalingGroup(t).LaunchTemplateVersion)
	}

	acts := len(s.activities(t))
	stdout, _, code := s.rollout(t, "--image", e.imageA, "--userdata", s.pool)
	if code != 0 || !strings.Contains(stdout, "nothing to do") {
		t.Errorf("re-run: exit %d, stdout %q; want 0 and nothing to do", code, stdout)
	}
	if v, a, ids := len(s.versions(t)), len(s.activities(t)), s.instanceIDs(t); v != 2 || a != acts || strings.Join(ids, " ") != strings.Join(now, " ") {
		t.Errorf("after the re-run: %d versions, %d scaling activities (was %d), instances %v (was %v)", v, a, acts, ids, now)
	}
}

// rotatedToken: a new bootstrap token gives a new version the group
// launches from, and no instance is replaced.
func (e *rolloutEnv) rotatedToken(t *testing.T) {
	s, old := e.newScenario(t, "token")
	const token = "rot4te.0123456789abcdef"
	ud := s.writePool(t, s.spec("a", token))
	acts := len(s.activities(t))
	if _, _, code := s.rollout(t, "--image", e.imageA, "--userdata", s.pool, "--ready-timeout", "60s"); code != 0 {
		t.Fatalf("rollout exit %d, want 0", code)
	}
	vs := s.versions(t)
	if len(vs) != 2 || s.scalingGroup(t).LaunchTemplateVersion != "2" {
		t.Fatalf("%d versions, group on %q; want 2 and version 2", len(vs), s.scalingGroup(t).LaunchTemplateVersion)
	}
	got, err := base64.StdEncoding.DecodeString(vs[0].LaunchTemplateData.UserData)
	if err != nil {
		t.Fatal(err)
	}
	if nodeToken(t, got) != token || vs[0].LaunchTemplateData.ImageId != e.imageA {
		t.Errorf("version 2: image %s, node file token %q; want %s and %s", vs[0].LaunchTemplateData.ImageId, nodeToken(t, got), e.imageA, token)
	}
	if ids := s.instanceIDs(t); strings.Join(ids, " ") != strings.Join(old, " ") || len(s.activities(t)) != acts {
		t.Errorf("instances %v (were %v), %d scaling activities (were %d): no instance may be replaced", ids, old, len(s.activities(t)), acts)
	}
	s.serving(t, old, roBuildA, ud) // the same digest: the token is not part of it
	stdout, _, code := s.rollout(t, "--image", e.imageA, "--userdata", s.pool)
	if code != 0 || !strings.Contains(stdout, "nothing to do") || len(s.versions(t)) != 2 {
		t.Errorf("re-run: exit %d, %d versions, stdout %q; want 0, 2 and nothing to do", code, len(s.versions(t)), stdout)
	}

	// Months of rollouts later the template holds the 30 versions ECS
	// allows: versions 3 to 30 made by earlier drover runs, used by no
	// instance. The next rotation deletes the oldest of them, 3, first.
	cv := ecs.CreateCreateLaunchTemplateVersionRequest()
	cv.LaunchTemplateId, cv.ImageId = s.template, e.imageA
	cv.UserData = base64.StdEncoding.EncodeToString(ud)
	cv.VersionDescription = "drover build=" + roBuildA + " config=" + strings.Repeat("0", 40) + " image=" + e.imageA + " size=2 max=3"
	for len(s.versions(t)) < 30 {
		if _, err := e.ecs.CreateLaunchTemplateVersion(cv); err != nil {
			t.Fatal(err)
		}
	}
	s.writePool(t, s.spec("a", "rot4te.fedcba9876543210"))
	stdout, stderr, code := s.rollout(t, "--image", e.imageA, "--userdata", s.pool)
	vs = s.versions(t)
	var nums []string
	for _, v := range vs {
		nums = append(nums, strconv.FormatInt(v.VersionNumber, 10))
	}
	if code != 0 || len(vs) != 30 || slices.Contains(nums, "3") || !slices.Contains(nums, "4") || vs[0].VersionNumber != 31 ||
		s.scalingGroup(t).LaunchTemplateVersion != "31" {
		t.Errorf("rotation in a full template: exit %d, versions %v, group on %q; want 0, 30 without 3, and 31 in use\n%s",
			code, nums, s.scalingGroup(t).LaunchTemplateVersion, stdout)
	}
	if !strings.Contains(stderr, "deleted launch template "+s.template+" version(s) 3") {
		t.Errorf("the rollout's progress does not say it deleted version 3:\n%s", stderr)
	}
	if ids := s.instanceIDs(t); strings.Join(ids, " ") != strings.Join(old, " ") {
		t.Errorf("instances %v (were %v): a rotated token replaces none", ids, old)
	}
}

// nodeToken is the bootstrap token of the node file in an Ignition config.
func nodeToken(t *testing.T, ud []byte) string {
	t.Helper()
	cfg, err := ignition.Parse(ud)
	if err != nil {
		t.Fatal(err)
	}
	nf, ok := cfg.File(agent.NodeFile)
	if !ok {
		t.Fatal("no node file in the version's user-data")
	}
	c, err := nodeconfig.Parse(nf, agent.NodeFile)
	if err != nil {
		t.Fatal(err)
	}
	return c.Cluster.BootstrapToken
}

// refusedUserData: an Ignition file the agent refuses (a copy of the
// bootstrap token outside the node file) stops the rollout after the first
// new instance, old nodes untouched, the refusal printed from the console.
func (e *rolloutEnv) refusedUserData(t *testing.T) {
	s, old := e.newScenario(t, "refused")
	good, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(good, &cfg); err != nil {
		t.Fatal(err)
	}
	st := cfg["storage"].(map[string]any)
	st["files"] = append(st["files"].([]any), map[string]any{"path": "/etc/opt/app/token.txt",
		"contents": map[string]any{"source": "data:," + e.cluster.BootstrapToken()}})
	bad, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ign := filepath.Join(s.dir, "refused.ign")
	if err := os.WriteFile(ign, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	sm := s.sample()
	stdout, stderr, code := s.rollout(t, "--image", e.imageB, "--userdata", ign, "--ready-timeout", "15s")
	sm.finish(t)
	if code != 1 {
		t.Errorf("rollout exit %d, want 1", code)
	}
	var failed []string
	for _, a := range s.activities(t) {
		for _, id := range a.CreatedInstances.CreatedInstance {
			if !contains(old, id) {
				failed = append(failed, id)
			}
		}
	}
	if len(failed) != 1 || sm.minServing < 2 {
		t.Fatalf("new instances %v (want 1), as few as %d Ready schedulable Nodes (want 2)", failed, sm.minServing)
	}
	in := e.standins.Instance(failed[0])
	if in == nil {
		t.Fatalf("no stand-in for %s", failed[0])
	}
	var refusal string
	for _, l := range strings.Split(string(in.Console()), "\n") {
		if _, after, ok := strings.Cut(l, "drover-agent: apply: FAILED: "); ok {
			refusal = after
		}
	}
	if !strings.Contains(refusal, "would hold the bootstrap token") {
		t.Fatalf("the stand-in's console has no refusal of the token copy:\n%s", in.Console())
	}
	if out := stdout + stderr; !strings.Contains(out, "drover-agent: apply: FAILED: "+refusal) || !strings.Contains(out, failed[0]) {
		t.Errorf("the output lacks the console's refusal of %s (%q)", failed[0], refusal)
	}
	waitFor(t, "the failed instance to leave the group", 30*time.Second, func() error {
		if ids := s.instanceIDs(t); strings.Join(ids, " ") != strings.Join(old, " ") {
			return fmt.Errorf("instances %v, want the old %v", ids, old)
		}
		return nil
	})
	s.serving(t, old, roBuildA, good)
	if g := s.scalingGroup(t); g.LaunchTemplateVersion != "1" || g.MaxSize != 3 || g.DesiredCapacity != 2 {
		t.Errorf("group on version %q, MaxSize %d, desired %d; want 1, 3, 2 again", g.LaunchTemplateVersion, g.MaxSize, g.DesiredCapacity)
	}
}

// interruptedResume: a rollout to image B killed mid-way finishes with
// --resume, replacing no node twice.
func (e *rolloutEnv) interruptedResume(t *testing.T) {
	s, old := e.newScenario(t, "resume")
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "60s"}
	// The first new instance stays without a Node until the run is
	// killed, so the kill lands while the rollout waits for it: the
	// stand-ins join in milliseconds, and a run left to race finished
	// before this test's (throttled) look saw the new instance.
	release := e.standins.Hold(func(sp ecsapi.InstanceSpec) bool {
		return sp.ImageID == e.imageB && bytes.Equal(sp.UserData, ud)
	})
	defer release()
	cmd := s.command(t, append(args, "--lock-ttl", "3s")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var held string
	waitFor(t, "a new instance", time.Minute, func() error {
		for _, id := range s.instanceIDs(t) {
			if !contains(old, id) {
				held = id
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	release()
	t.Logf("killed drover rollout at new instance %s (held without a Node); its output:\n%s", held, out.String())
	if si := e.standins.Instance(held); si == nil || !strings.Contains(string(si.Console()), "held") {
		t.Fatalf("new instance %s was not held: the kill raced the rollout", held)
	}
	// Its lock (renewed every second, --lock-ttl 3s) outlives it by at most
	// 3 s; then the next run takes the group over (KilledBeforeMaxSize
	// breaks a live one instead).
	waitFor(t, "the killed run's lock to expire", 30*time.Second, func() error {
		for k, v := range s.lockTags(t) {
			_, until, _ := strings.Cut(v, "until=")
			if u, err := time.Parse(time.RFC3339, until); err != nil || !time.Now().After(u) {
				return fmt.Errorf("lock %s=%s", k, v)
			}
		}
		return nil
	})

	acts, vers := len(s.activities(t)), len(s.versions(t))
	stdout, stderr, code := s.rollout(t, args...)
	if code != 1 || !strings.Contains(stdout+stderr, "--resume") || len(s.activities(t)) != acts || len(s.versions(t)) != vers {
		t.Errorf("plain re-run: exit %d, %d activities (were %d), %d versions (were %d); want 1, a hint at --resume and no change",
			code, len(s.activities(t)), acts, len(s.versions(t)), vers)
	}
	if _, stderr, code := s.rollout(t, append(args, "--resume")...); code != 0 || !strings.Contains(stderr, "expired: its holder is gone; taking over") {
		t.Fatalf("--resume exit %d, want 0 and the dead run's lock taken over:\n%s", code, stderr)
	}
	created, destroyed := map[string]int{}, map[string]int{}
	for _, a := range s.activities(t) {
		for _, id := range a.CreatedInstances.CreatedInstance {
			created[id]++
		}
		for _, id := range a.DestroyedInstances.DestroyedInstance {
			destroyed[id]++
		}
	}
	if len(created) > 4 {
		t.Errorf("%d instances launched in all, want ≤ 4 (2 old, 2 new): %v", len(created), created)
	}
	if len(destroyed) != 2 || destroyed[old[0]] != 1 || destroyed[old[1]] != 1 {
		t.Errorf("removed %v, want each old instance %v once and nothing else", destroyed, old)
	}
	now := s.instanceIDs(t)
	if len(now) != 2 || contains(now, old[0]) || contains(now, old[1]) || len(s.versions(t)) != 2 {
		t.Errorf("instances %v, %d versions; want 2 new instances, 2 versions", now, len(s.versions(t)))
	}
	s.serving(t, now, roBuildB, ud)
	if stdout, _, code := s.rollout(t, args...); code != 0 || !strings.Contains(stdout, "nothing to do") {
		t.Errorf("re-run after --resume: exit %d, stdout %q; want 0 and nothing to do", code, stdout)
	}
}

// repair: a healthy group is left alone; a Node that stopped heartbeating
// is replaced once it has been NotReady longer than --after.
func (e *rolloutEnv) repair(t *testing.T) {
	s, old := e.newScenario(t, "repair")
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(what, after string) {
		t.Helper()
		acts := len(s.activities(t))
		stdout, _, code := s.rollout(t, "--repair", "--after", after)
		if code != 0 || !strings.Contains(stdout, "nothing to repair") {
			t.Errorf("%s: exit %d, stdout %q; want 0 and nothing to repair", what, code, stdout)
		}
		if ids := s.instanceIDs(t); strings.Join(ids, " ") != strings.Join(old, " ") || len(s.activities(t)) != acts {
			t.Errorf("%s: instances %v (were %v), %d activities (were %d)", what, ids, old, len(s.activities(t)), acts)
		}
	}
	unchanged("a healthy group", "30s")
	s.serving(t, old, roBuildA, ud)

	frozen, healthy := old[0], old[1]
	e.standins.Instance(frozen).Freeze()
	var since time.Time
	waitFor(t, "the node lifecycle controller to mark "+frozen+"'s Node Ready=Unknown", 3*time.Minute, func() error {
		n := s.node(t, frozen)
		if n == nil {
			return fmt.Errorf("no Node")
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
				since = c.LastTransitionTime.Time
				return nil
			}
		}
		return fmt.Errorf("Ready %s", readyStatus(n))
	})
	frozenNode := s.node(t, frozen).Name
	unchanged("NotReady for less than --after", "20s")
	time.Sleep(time.Until(since.Add(21 * time.Second)))
	if _, _, code := s.rollout(t, "--repair", "--after", "20s", "--ready-timeout", "60s"); code != 0 {
		t.Fatalf("repair exit %d, want 0", code)
	}
	now := s.instanceIDs(t)
	if len(now) != 2 || contains(now, frozen) || !contains(now, healthy) {
		t.Fatalf("instances %v, want %s and a replacement of %s", now, healthy, frozen)
	}
	s.serving(t, now, roBuildA, ud)
	if g := s.scalingGroup(t); g.MinSize != 2 || g.MaxSize != 3 || g.DesiredCapacity != 2 {
		t.Errorf("group MinSize %d, MaxSize %d, desired %d after the repair; want 2, 3, 2", g.MinSize, g.MaxSize, g.DesiredCapacity)
	}
	if _, err := e.kc.CoreV1().Nodes().Get(context.Background(), frozenNode, metav1.GetOptions{}); err == nil {
		t.Errorf("the frozen instance's Node %s is still there", frozenNode)
	}
	for _, a := range s.activities(t) {
		if d := a.DestroyedInstances.DestroyedInstance; len(d) > 0 && (len(d) != 1 || d[0] != frozen) {
			t.Errorf("activity %s removed %v; only %s may be", a.ScalingActivityId, d, frozen)
		}
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
