package smoke

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/harness/cluster"
)

const (
	oomMsg     = "kernel: Memory cgroup out of memory: Killed process 812 (probe) total-vm:1101876kB, anon-rss:65536kB"
	fsMsg      = "kernel: EXT4-fs error (device loop0): trigger_test_error:1234: comm sh: drover smoke"
	remountMsg = "EXT4-fs (loop0): Remounting filesystem read-only"
	fsProbe    = `{"device":"/dev/loop0","before":"yes","after":"no","superblock":"ro,errors=remount-ro"}`
)

func TestJudgeOOMReport(t *testing.T) {
	good := func() (*cluster.Pod, *cluster.Node, []cluster.Event) {
		return &cluster.Pod{Name: oomPod, Phase: "Failed", TerminatedReasons: []string{"OOMKilled"}, ExitCodes: []int32{137}},
			&cluster.Node{Name: "n", Ready: true},
			[]cluster.Event{{Reason: "ConfigDrift", Type: "Warning", Source: "drover-agent", Message: "x"},
				{Reason: "OOMKilling", Type: "Warning", Source: "drover-agent", Message: oomMsg}}
	}
	if d, err := JudgeOOMReport(good()); err != nil {
		t.Fatalf("good report refused: %v (%s)", err, d)
	}
	// What containerd 2.4 reported on the node when the pod's cgroup hit
	// the limit first.
	p, n, evs := good()
	p.TerminatedReasons = []string{"Error"}
	if d, err := JudgeOOMReport(p, n, evs); err != nil {
		t.Fatalf("Error/137 refused: %v (%s)", err, d)
	}
	for _, tc := range []struct {
		name string
		edit func(p **cluster.Pod, n *cluster.Node, evs *[]cluster.Event)
		want string
	}{
		{"no event", func(_ **cluster.Pod, _ *cluster.Node, evs *[]cluster.Event) { *evs = (*evs)[:1] }, "no OOMKilling Event"},
		{"event from the kubelet", func(_ **cluster.Pod, _ *cluster.Node, evs *[]cluster.Event) { (*evs)[1].Source = "kubelet" }, "no OOMKilling Event"},
		{"another process killed", func(_ **cluster.Pod, _ *cluster.Node, evs *[]cluster.Event) {
			(*evs)[1].Message = strings.Replace(oomMsg, "(probe)", "(containerd)", 1)
		}, "no OOMKilling Event"},
		{"our own words, not the kernel's", func(_ **cluster.Pod, _ *cluster.Node, evs *[]cluster.Event) {
			(*evs)[1].Message = "OOM kill seen"
		}, "no OOMKilling Event"},
		{"pod ended with an error of its own", func(p **cluster.Pod, _ *cluster.Node, _ *[]cluster.Event) {
			(*p).TerminatedReasons, (*p).ExitCodes = []string{"Error"}, []int32{1}
		}, "want Failed [OOMKilled]"},
		{"pod got all its memory", func(p **cluster.Pod, _ *cluster.Node, _ *[]cluster.Event) {
			(*p).Phase, (*p).TerminatedReasons, (*p).ExitCodes = "Succeeded", []string{"Completed"}, []int32{0}
		}, "want Failed [OOMKilled]"},
		{"pod still running", func(p **cluster.Pod, _ *cluster.Node, _ *[]cluster.Event) {
			(*p).Phase, (*p).TerminatedReasons = "Running", nil
		}, "want Failed [OOMKilled]"},
		{"no pod", func(p **cluster.Pod, _ *cluster.Node, _ *[]cluster.Event) { *p = nil }, "no pod"},
		{"node not Ready", func(_ **cluster.Pod, n *cluster.Node, _ *[]cluster.Event) { n.Ready = false }, "not Ready"},
	} {
		p, n, evs := good()
		tc.edit(&p, n, &evs)
		if _, err := JudgeOOMReport(p, n, evs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestJudgeFSErrorReport(t *testing.T) {
	good := func() (string, *cluster.Node, []cluster.Event) {
		return fsProbe,
			&cluster.Node{Name: "n", Conditions: map[string]cluster.Condition{
				"ReadonlyFilesystem": {Status: "True", Reason: "FilesystemIsReadOnly", Message: remountMsg}}},
			[]cluster.Event{{Reason: "FilesystemError", Type: "Warning", Source: "drover-agent", Message: fsMsg}}
	}
	if d, err := JudgeFSErrorReport(good()); err != nil {
		t.Fatalf("good report refused: %v (%s)", err, d)
	}
	for _, tc := range []struct {
		name string
		edit func(msg *string, n *cluster.Node, evs *[]cluster.Event)
		want string
	}{
		{"still writable", func(m *string, _ *cluster.Node, _ *[]cluster.Event) {
			*m = strings.Replace(fsProbe, `"after":"no"`, `"after":"yes"`, 1)
		}, "did not go read-only"},
		{"read-only from the start", func(m *string, _ *cluster.Node, _ *[]cluster.Event) {
			*m = strings.Replace(fsProbe, `"before":"yes"`, `"before":"no"`, 1)
		}, "did not go read-only"},
		{"probe failed", func(m *string, _ *cluster.Node, _ *[]cluster.Event) { *m = `{"error":"mount: no loop"}` }, "did not go read-only"},
		{"not JSON", func(m *string, _ *cluster.Node, _ *[]cluster.Event) { *m = "oops" }, "probe report"},
		{"no event", func(_ *string, _ *cluster.Node, evs *[]cluster.Event) { *evs = nil }, "no FilesystemError Event"},
		{"event about another device", func(_ *string, _ *cluster.Node, evs *[]cluster.Event) {
			(*evs)[0].Message = strings.Replace(fsMsg, "loop0", "loop3", 1)
		}, "names loop3"},
		{"condition False", func(_ *string, n *cluster.Node, _ *[]cluster.Event) {
			n.Conditions["ReadonlyFilesystem"] = cluster.Condition{Status: "False", Reason: "FilesystemIsNotReadOnly"}
		}, "condition ReadonlyFilesystem False"},
		{"condition without the kernel's line", func(_ *string, n *cluster.Node, _ *[]cluster.Event) {
			n.Conditions["ReadonlyFilesystem"] = cluster.Condition{Status: "True", Reason: "FilesystemIsReadOnly", Message: "read-only"}
		}, "with the kernel's remount line"},
		{"condition about another device", func(_ *string, n *cluster.Node, _ *[]cluster.Event) {
			n.Conditions["ReadonlyFilesystem"] = cluster.Condition{Status: "True", Reason: "FilesystemIsReadOnly", Message: strings.Replace(remountMsg, "loop0", "vda4", 1)}
		}, "want True/FilesystemIsReadOnly"},
	} {
		m, n, evs := good()
		tc.edit(&m, n, &evs)
		if _, err := JudgeFSErrorReport(m, n, evs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	n := &cluster.Node{Conditions: map[string]cluster.Condition{"ReadonlyFilesystem": {Status: "False", Reason: "FilesystemIsNotReadOnly"}}}
	if err := JudgeFSConditionCleared(n); err != nil {
		t.Error(err)
	}
	n.Conditions["ReadonlyFilesystem"] = cluster.Condition{Status: "True", Reason: "FilesystemIsReadOnly"}
	if err := JudgeFSConditionCleared(n); err == nil {
		t.Error("a True condition after the reboot passed")
	}
	if err := JudgeFSConditionCleared(&cluster.Node{}); err == nil {
		t.Error("no condition at all passed")
	}
}
