//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/harness/ecsapi"
	"github.com/drover-os/drover/harness/registry"
	"github.com/drover-os/drover/harness/smoke"
	"github.com/drover-os/drover/image/build"
)

// TestRolloutQEMU is issue 26's scenario with real instances: a scaling
// group of two drover nodes booted in QEMU from image A (published with
// drover publish into the emulated ECS), rolled to image B with drover
// rollout. From the API server, the harness checks that each old node is
// cordoned only once a new Node with B's build ID is Ready, that a
// Deployment guarded by a PodDisruptionBudget (minAvailable 1) never has
// fewer than one available pod, and that a second run has nothing to do.
// B's recipe caches the Deployment's image in its root and the hello image
// on its cache disk (issue 38), which drover publish imports as the
// image's data disk, so ESS's instances of B boot with it attached as a
// second disk: the registry refuses every request from the rollout's
// start, and B's nodes run the Deployment's pods and a hello pod each from
// their image cache (DroverImageCache=True) without asking it, while a pod
// of an image they do not cache is refused.
func TestRolloutQEMU(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp("", "drover-e2e-rollout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	start := time.Now()

	cacheDir, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	env, err := smoke.Start(ctx, smoke.Options{WorkDir: filepath.Join(work, "env"), CacheDir: filepath.Join(cacheDir, "drover"),
		Version: "v1.37.2", Drover: bin("drover"), Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()

	// Two images whose build IDs differ: B's agent is built with another
	// version string, and B's recipe (an overlay of A's) caches the
	// Deployment's image in its root and the hello image on its cache disk
	// (issue 38), fetched from the harness registry, which the build
	// reaches through --registry-mirror.
	recipe := filepath.Join(repo, "recipes", "ecs-node.yaml")
	workload := env.GuestRegistry() + "/" + registry.ProbeImage
	onDisk := env.GuestRegistry() + "/" + registry.HelloImage
	recipeB := cachedOverlay(t, work, workload+"@"+env.Images[registry.ProbeImage], onDisk+"@"+env.Images[registry.HelloImage])
	mirror := "--registry-mirror=" + env.GuestRegistry() + "=http://" + env.Registry.Addr()
	agentB := filepath.Join(work, "b-bin", "drover-agent")
	goBuild(t, "build", "-trimpath", "-ldflags=-s -w -X main.version=rollout-e2e-b", "-o", agentB, "./cmd/drover-agent")
	outA, outB := filepath.Join(work, "a"), filepath.Join(work, "b")
	run(t, bin("drover"), "build", recipe, "-o", outA, "--agent", bin("drover-agent"), "--init", bin("drover-init"))
	run(t, bin("drover"), "lock", recipeB, mirror)
	run(t, bin("drover"), "build", recipeB, "-o", outB, "--agent", agentB, "--init", bin("drover-init"), mirror)
	mfA := readManifest(t, filepath.Join(outA, "ecs-node.manifest.json"))
	mfB := readManifest(t, filepath.Join(outB, "ecs-node.manifest.json"))
	if _, err := os.Stat(filepath.Join(outB, build.DiskImageFile("ecs-node"))); err != nil {
		t.Fatalf("image B has no cache disk image: %v", err)
	}
	if mfA.BuildID == mfB.BuildID {
		t.Fatalf("images A and B share build ID %s", mfA.BuildID)
	}
	t.Logf("images built in %s: A build %s, B build %s", time.Since(start).Round(time.Second), mfA.BuildID, mfB.BuildID)

	vms := env.Launcher(filepath.Join(work, "vms"))
	defer vms.StopAll()
	const region, key, secret = "cn-hangzhou", "LTAI5tDroverE2E", "e2e-secret"
	cloud := ecsapi.New(ecsapi.Config{AccessKeyID: key, AccessKeySecret: secret, Region: region, ImportDelay: 3 * time.Second,
		Launcher: vms, Dir: filepath.Join(work, "cloud"), Log: quietWriter{testWriter{t}}})
	eps, err := cloud.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	cloud.CreateBucket("drover-images")
	cliEnv := append(os.Environ(), "HOME="+work, "ALIBABA_CLOUD_ACCESS_KEY_ID="+key, "ALIBABA_CLOUD_ACCESS_KEY_SECRET="+secret,
		"ALIBABA_CLOUD_ECS_METADATA_DISABLED=true",
		"DROVER_ECS_ENDPOINT=http://"+eps.ECS, "DROVER_ESS_ENDPOINT=http://"+eps.ESS, "DROVER_OSS_ENDPOINT=http://"+eps.OSS)

	publish := func(out string) string {
		stdout, _ := runCLIOut(t, cliEnv, 0, bin("drover"), "publish", filepath.Join(out, "ecs-node.raw"), "--region", region,
			"--bucket", "drover-images")
		id := strings.TrimSpace(stdout)
		if !strings.HasPrefix(id, "m-") || strings.Contains(id, "\n") {
			t.Fatalf("drover publish printed %q, not one image ID", stdout)
		}
		return id
	}
	imageA, imageB := publish(outA), publish(outB)
	t.Logf("published: A %s, B %s (%s)", imageA, imageB, time.Since(start).Round(time.Second))

	// The pool: what a platform team's pipeline keeps in Git.
	spec, err := env.UserDataSpec()
	if err != nil {
		t.Fatal(err)
	}
	pool := filepath.Join(work, "pool.yaml")
	poolYAML, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, pool, poolYAML)
	ud, err := env.UserData()
	if err != nil {
		t.Fatal(err)
	}

	// Terraform's part: the launch template (version 1 on image A) and the
	// scaling group, through the SDK as the provider calls it.
	ecsc, err := ecs.NewClientWithAccessKey(region, key, secret)
	if err != nil {
		t.Fatal(err)
	}
	ecsc.Domain = eps.ECS
	lt := ecs.CreateCreateLaunchTemplateRequest()
	lt.LaunchTemplateName, lt.ImageId, lt.InstanceType = "drover-pool", imageA, "ecs.g7.large"
	lt.UserData = base64.StdEncoding.EncodeToString(ud)
	ltResp, err := ecsc.CreateLaunchTemplate(lt)
	if err != nil {
		t.Fatal(err)
	}
	group := cloud.AddScalingGroup(ecsapi.ScalingGroup{Name: "drover-pool", RegionID: region, ZoneID: "cn-hangzhou-h",
		InstanceType: "ecs.g7.large", LaunchTemplateID: ltResp.LaunchTemplateId, LaunchTemplateVersion: "1",
		MinSize: 2, MaxSize: 3, DesiredCapacity: 2, MultiAZPolicy: "PRIORITY"})
	essc, err := ess.NewClientWithAccessKey(region, key, secret)
	if err != nil {
		t.Fatal(err)
	}
	essc.Domain = eps.ESS

	rc, err := clientcmd.BuildConfigFromFlags("", env.Cluster.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(rc)
	old := waitNodes(t, ctx, kc, mfA.BuildID, 2, 20*time.Minute)
	t.Logf("group %s on image A: nodes %v Ready (%s)", group, old, time.Since(start).Round(time.Second))

	// The workload the rollout must not take down. The harness's control
	// plane has no kube-scheduler (the smoke names each pod's node): bind
	// plays its part for this Deployment.
	go bind(ctx, kc)
	deploy(t, ctx, kc, workload)
	watch := startWatch(ctx, kc, mfB.BuildID)
	// From here the registry refuses every request: B's nodes start the
	// Deployment's pods from their image cache or not at all (the
	// PodDisruptionBudget then holds the drain of the last old node).
	before := len(env.Registry.Requests())
	env.Registry.Refuse(true)

	rolloutArgs := []string{"rollout", "--region", region, "--scaling-group", group, "--image", imageB, "--userdata", pool,
		"--kubeconfig", env.Cluster.AdminKubeconfig(), "--ready-timeout", "20m", "--drain-timeout", "5m"}
	s := time.Now()
	out := runCLI(t, cliEnv, 0, bin("drover"), rolloutArgs...)
	t.Logf("drover rollout to B: %s\n%s", time.Since(s).Round(time.Second), tail(out, 30))
	w := watch.stop()

	if w.minAvailable < 1 {
		t.Errorf("the Deployment had %d available pods at %s during the rollout (PodDisruptionBudget minAvailable 1)", w.minAvailable, w.minAt.Format(time.TimeOnly))
	}
	for _, n := range old {
		c, ok := w.cordoned[n]
		if !ok {
			t.Errorf("old node %s was never seen cordoned", n)
			continue
		}
		if ready := w.readyBefore(n); ready < w.cordonRank(n) {
			t.Errorf("old node %s cordoned at %s with %d new Node(s) with build %s Ready before it, want %d", n, c.Format(time.TimeOnly), ready, mfB.BuildID, w.cordonRank(n))
		}
	}
	now := waitNodes(t, ctx, kc, mfB.BuildID, 2, time.Minute)
	t.Logf("after the rollout: nodes %v Ready with build %s; Deployment available never below %d", now, mfB.BuildID, w.minAvailable)
	checkImageCache(t, ctx, kc, env, now, workload, onDisk, env.GuestRegistry()+"/drover/uncached:v1", before)
	env.Registry.Refuse(false)
	// The last old instance may still be shutting down (Removing): ECS
	// presses its power button and waits for it.
	var insts []string
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(5 * time.Second) {
		insts = scalingInstances(t, essc, group)
		if len(insts) == 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(insts) != 2 || strings.Count(strings.Join(insts, " "), "(InService)") != 2 {
		t.Errorf("the group holds %v after the rollout, want 2 instances InService", insts)
	}

	again := runCLI(t, cliEnv, 0, bin("drover"), rolloutArgs...)
	if !strings.Contains(again, "nothing to do") {
		t.Errorf("a second drover rollout did not say there is nothing to do:\n%s", again)
	}
	if got := scalingInstances(t, essc, group); strings.Join(got, ",") != strings.Join(insts, ",") {
		t.Errorf("the second run changed the group's instances: %v, then %v", insts, got)
	}
	t.Logf("TestRolloutQEMU wall time %s", time.Since(start).Round(time.Second))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// quietWriter drops the emulator's lines for reads and upload parts: the
// writes are the story.
type quietWriter struct{ w testWriter }

func (q quietWriter) Write(p []byte) (int, error) {
	if l := string(p); strings.Contains(l, " Describe") || strings.Contains(l, "oss PUT") {
		return len(p), nil
	}
	return q.w.Write(p)
}

// runCLI runs a drover command with env and wants exit code want; it
// returns stdout and stderr together.
func runCLI(t *testing.T, env []string, want int, name string, args ...string) string {
	t.Helper()
	_, all := runCLIOut(t, env, want, name, args...)
	return all
}

// runCLIOut is runCLI that also returns stdout alone.
func runCLIOut(t *testing.T, env []string, want int, name string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	b := bytes.NewBufferString(o.String() + e.String())
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	if code != want {
		t.Fatalf("%s %s: exit %d, want %d\n%s", filepath.Base(name), strings.Join(args, " "), code, want, tail(b.String(), 60))
	}
	return o.String(), b.String()
}

// waitNodes waits until n Nodes labelled with build are Ready and returns
// their names.
func waitNodes(t *testing.T, ctx context.Context, kc kubernetes.Interface, build string, n int, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeconfig.LabelBuildID + "=" + build})
		var ready []string
		if err == nil {
			for _, nd := range nodes.Items {
				if nodeIsReady(&nd) {
					ready = append(ready, nd.Name)
				}
			}
		}
		if len(ready) >= n {
			return ready
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Ready Nodes with build %s after %s, want %d (%v)", len(ready), build, timeout, n, err)
		}
		time.Sleep(5 * time.Second)
	}
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deploy creates a two-replica Deployment and its PodDisruptionBudget and
// waits until both pods are available.
func deploy(t *testing.T, ctx context.Context, kc kubernetes.Interface, image string) {
	t.Helper()
	labels := map[string]string{"app": "rollout-e2e"}
	two, one := int32(2), intstr.FromInt32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rollout-e2e", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "main", Image: image, Args: []string{"serve"}}}}}},
	}
	if _, err := kc.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "rollout-e2e", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	if _, err := kc.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		got, err := kc.AppsV1().Deployments("default").Get(ctx, "rollout-e2e", metav1.GetOptions{})
		if err == nil && got.Status.AvailableReplicas == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deployment rollout-e2e not available after 10m: %+v %v", got.Status, err)
		}
		time.Sleep(3 * time.Second)
	}
}

// bind schedules the Deployment's pods as kube-scheduler would for
// them: each pending pod to the Ready, schedulable Node running fewest of
// them, through the pods/binding subresource.
func bind(ctx context.Context, kc kubernetes.Interface) {
	for ctx.Err() == nil {
		time.Sleep(time.Second)
		pods, err := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=rollout-e2e"})
		if err != nil {
			continue
		}
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		load := map[string]int{}
		for _, n := range nodes.Items {
			if nodeIsReady(&n) && !n.Spec.Unschedulable {
				load[n.Name] = 0
			}
		}
		for _, p := range pods.Items {
			if _, ok := load[p.Spec.NodeName]; ok && p.DeletionTimestamp == nil {
				load[p.Spec.NodeName]++
			}
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
				continue
			}
			best := ""
			for n, l := range load {
				if best == "" || l < load[best] || l == load[best] && n < best {
					best = n
				}
			}
			if best == "" {
				break
			}
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
				Target: corev1.ObjectReference{Kind: "Node", Name: best}}
			if kc.CoreV1().Pods("default").Bind(ctx, b, metav1.CreateOptions{}) == nil {
				load[best]++
			}
		}
	}
}

// watcher follows the API server during the rollout: the Deployment's
// pods every second, the Nodes by a watch.
type watcher struct {
	mu           sync.Mutex
	minAvailable int
	minAt        time.Time
	// The Node side comes from a watch, whose events arrive in the order
	// the API server stored the changes: seq orders a new Node's Ready
	// before or after an old Node's cordon even within one second (a
	// one-second poll saw both at once when the rollout cordoned right
	// after the Ready). Times are for the messages.
	seq         int
	cordoned    map[string]time.Time // node → first seen unschedulable
	cordonedSeq map[string]int
	readyNew    map[string]time.Time // new node → first seen Ready with the new build
	readyNewSeq map[string]int
	done        chan struct{}
	stopped     chan struct{}
}

func startWatch(ctx context.Context, kc kubernetes.Interface, build string) *watcher {
	w := &watcher{minAvailable: 1 << 30, cordoned: map[string]time.Time{}, readyNew: map[string]time.Time{},
		cordonedSeq: map[string]int{}, readyNewSeq: map[string]int{},
		done: make(chan struct{}), stopped: make(chan struct{})}
	nodesDone := make(chan struct{})
	go func() {
		defer close(nodesDone)
		w.watchNodes(ctx, kc, build)
	}()
	go func() {
		defer close(w.stopped)
		defer func() { <-nodesDone }()
		for {
			now := time.Now()
			pods, perr := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=rollout-e2e"})
			w.mu.Lock()
			if perr == nil {
				avail := 0
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && podReady(&p) {
						avail++
					}
				}
				if avail < w.minAvailable {
					w.minAvailable, w.minAt = avail, now
				}
			}
			w.mu.Unlock()
			select {
			case <-w.done:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

// watchNodes lists the Nodes, then watches them from that list's
// resourceVersion (listing again if the watch ends), until w.done.
func (w *watcher) watchNodes(ctx context.Context, kc kubernetes.Interface, build string) {
	for {
		select {
		case <-w.done:
			return
		default:
		}
		list, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for i := range list.Items {
			w.observeNode(&list.Items[i], build)
		}
		wi, err := kc.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		func() {
			defer wi.Stop()
			for {
				select {
				case <-w.done:
					return
				case ev, ok := <-wi.ResultChan():
					if !ok {
						return
					}
					if n, isNode := ev.Object.(*corev1.Node); isNode {
						w.observeNode(n, build)
					}
				}
			}
		}()
	}
}

// observeNode records, in the order the API server's changes arrive, an
// old Node's first cordon and a new Node's first Ready with the new build.
func (w *watcher) observeNode(n *corev1.Node, build string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	now := time.Now()
	if _, seen := w.cordoned[n.Name]; !seen && n.Spec.Unschedulable {
		w.cordoned[n.Name], w.cordonedSeq[n.Name] = now, w.seq
	}
	if _, seen := w.readyNew[n.Name]; !seen && n.Labels[nodeconfig.LabelBuildID] == build && nodeIsReady(n) {
		w.readyNew[n.Name], w.readyNewSeq[n.Name] = now, w.seq
	}
}

func (w *watcher) stop() *watcher {
	close(w.done)
	<-w.stopped
	return w
}

// readyBefore counts the new Nodes whose Ready the watch delivered before
// node's cordon.
func (w *watcher) readyBefore(node string) int {
	n := 0
	for _, r := range w.readyNewSeq {
		if r < w.cordonedSeq[node] {
			n++
		}
	}
	return n
}

// cordonRank is 1 for the first old node cordoned, 2 for the second…
func (w *watcher) cordonRank(node string) int {
	rank := 0
	for _, c := range w.cordonedSeq {
		if c <= w.cordonedSeq[node] {
			rank++
		}
	}
	return rank
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// scalingInstances lists the group's instance IDs, sorted.
func scalingInstances(t *testing.T, essc *ess.Client, group string) []string {
	t.Helper()
	req := ess.CreateDescribeScalingInstancesRequest()
	req.ScalingGroupId = group
	resp, err := essc.DescribeScalingInstances(req)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range resp.ScalingInstances.ScalingInstance {
		ids = append(ids, fmt.Sprintf("%s(%s)", in.InstanceId, in.LifecycleState))
	}
	sort.Strings(ids)
	return ids
}

// cachedOverlay writes B's recipe into work: an overlay of
// recipes/ecs-node.yaml (copied beside it with its lock, as extends
// wants) that caches root in the root and disk on the cache disk; drover
// lock then locks it.
func cachedOverlay(t *testing.T, work, root, disk string) string {
	t.Helper()
	dir := filepath.Join(work, "recipes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ecs-node.yaml", "ecs-node.yaml.lock"} {
		writeFile(t, filepath.Join(dir, f), readFile(t, filepath.Join(repo, "recipes", f)))
	}
	p := filepath.Join(dir, "ecs-node-cached.yaml")
	writeFile(t, p, []byte("name: ecs-node\nextends: ecs-node.yaml\nimages:\n  - ref: "+root+"\n  - ref: "+disk+"\n    location: disk\n"))
	return p
}

// checkImageCache, with the registry still refusing every request since
// before the rollout (the requests after the first before): each of B's
// nodes reports DroverImageCache=True naming both cached repositories,
// the Deployment's pods (cached, in the root) run on them, a pod of the
// image on the cache disk (onDisk) runs to completion on each, and the
// registry saw no request; then a pod of an image B does not cache
// (uncached), on one of them, stays in ErrImagePull and the registry's log
// has its refused requests: the refusal was in force.
func checkImageCache(t *testing.T, ctx context.Context, kc kubernetes.Interface, env *smoke.Env, nodes []string, cached, onDisk, uncached string, before int) {
	t.Helper()
	for _, n := range nodes {
		nd, err := kc.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, c := range nd.Status.Conditions {
			if c.Type == agent.ImageCacheCondition {
				found = true
				t.Logf("node %s: %s=%s (%s): %s", n, c.Type, c.Status, c.Reason, c.Message)
				// The message names each image as repo@digest.
				for _, im := range []string{cached, onDisk} {
					if repo := im[:strings.LastIndex(im, ":")]; c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, repo+"@sha256:") {
						t.Errorf("node %s: %s=%s (%s) %q, want True naming %s", n, c.Type, c.Status, c.Reason, c.Message, repo)
					}
				}
			}
		}
		if !found {
			t.Errorf("node %s has no %s condition", n, agent.ImageCacheCondition)
		}
	}
	pods, err := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=rollout-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	onB := 0
	for i := range pods.Items {
		if p := &pods.Items[i]; slices.Contains(nodes, p.Spec.NodeName) && podReady(p) {
			onB++
		}
	}
	if onB == 0 {
		t.Errorf("no pod of the Deployment ready on B's nodes %v", nodes)
	}
	for i, n := range nodes {
		name := fmt.Sprintf("cached-disk-%d", i)
		if err := podCompletes(ctx, kc, name, n, onDisk); err != nil {
			t.Errorf("a pod of %s (cached on B's cache disk) on node %s: %v", onDisk, n, err)
		}
	}
	var asked []string
	for _, q := range env.Registry.Requests()[before:] {
		asked = append(asked, fmt.Sprintf("%s %s (refused %v)", q.Method, q.Path, q.Refused))
	}
	if len(asked) > 0 {
		t.Errorf("with B caching %s, the nodes asked the registry %d times during the rollout: %s", cached, len(asked), strings.Join(asked, ", "))
	}

	mid := len(env.Registry.Requests())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "uncached", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodes[0], RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: uncached}}}}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer kc.CoreV1().Pods("default").Delete(context.WithoutCancel(ctx), "uncached", metav1.DeleteOptions{})
	var waiting string
	for deadline := time.Now().Add(3 * time.Minute); waiting == "" && time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		p, err := kc.CoreV1().Pods("default").Get(ctx, "uncached", metav1.GetOptions{})
		if err != nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				waiting = w.Reason + ": " + w.Message
			}
		}
	}
	var refused []string
	for _, q := range env.Registry.Requests()[mid:] {
		if q.Refused {
			refused = append(refused, q.Method+" "+q.Path)
		}
	}
	if waiting == "" || len(refused) == 0 {
		t.Errorf("the pod of %s, not cached: waiting %q, the registry refused %q; want ErrImagePull and its refused requests", uncached, waiting, refused)
	}
	t.Logf("registry refusing: B's nodes ran the Deployment's pods (%d ready on them) and asked it %d times; the uncached pod: %s; registry refused %d requests (%s)",
		onB, len(asked), waiting, len(refused), strings.Join(refused, ", "))
}

// podCompletes runs a pod of image on node and waits until the kubelet
// reports its container terminated with exit code 0; it deletes the pod.
func podCompletes(ctx context.Context, kc kubernetes.Interface, name, node, image string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: image}}}}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer kc.CoreV1().Pods("default").Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	var last string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		p, err := kc.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
				return nil
			case cs.State.Terminated != nil:
				return fmt.Errorf("exited %d (%s)", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
			case cs.State.Waiting != nil:
				last = cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
			}
		}
	}
	return fmt.Errorf("not completed after 3m (last: %s)", last)
}
