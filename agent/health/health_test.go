package health

import "testing"

func TestParseRecord(t *testing.T) {
	r, ok := ParseRecord("3,1234,98765432,-;Memory cgroup out of memory: Killed process 812 (probe) total-vm:1101876kB\n SUBSYSTEM=memory\n")
	if !ok || r.Seq != 1234 || r.Usec != 98765432 || r.Message != "Memory cgroup out of memory: Killed process 812 (probe) total-vm:1101876kB" {
		t.Errorf("ParseRecord = %+v, %v", r, ok)
	}
	// The flags field is optional to the reader: three fields are enough.
	if r, ok := ParseRecord("6,5,100;short header"); !ok || r.Seq != 5 || r.Usec != 100 || r.Message != "short header" {
		t.Errorf("three-field record = %+v, %v", r, ok)
	}
	for _, bad := range []string{"", "no header", "3,1;x", "3,a,1,-;x", "3,1,b,-;x"} {
		if r, ok := ParseRecord(bad); ok {
			t.Errorf("ParseRecord(%q) = %+v, want not ok", bad, r)
		}
	}
}

// Lines as the kernel logs them (mm/oom_kill.c, kernel/hung_task.c,
// fs/ext4/super.c, fs/xfs/xfs_fsops.c), and near misses.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		line, event, cond string
	}{
		{"Memory cgroup out of memory: Killed process 812 (probe) total-vm:1101876kB, anon-rss:261632kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:580kB oom_score_adj:999", "OOMKilling", ""},
		{"Out of memory: Killed process 4242 (java) total-vm:4096kB, anon-rss:1024kB", "OOMKilling", ""},
		{"INFO: task jbd2/vda4-8:187 blocked for more than 120 seconds.", "TaskHung", ""},
		{"EXT4-fs (loop0): Remounting filesystem read-only", "FilesystemError", ReadonlyFilesystem},
		{"XFS (nvme1n1): Corruption of in-memory data (0x8) detected at xfs_trans_cancel+0x12c/0x150 (fs/xfs/xfs_trans.c:1097).  Shutting down filesystem.", "FilesystemError", ReadonlyFilesystem},
		{"EXT4-fs error (device loop0): trigger_test_error:1234: comm probe: drover smoke", "FilesystemError", ""},
		{"EXT4-fs (vda4): error count since last fsck: 3", "FilesystemError", ""},
	} {
		f, ok := Classify(tc.line)
		if !ok || f.Event != tc.event || f.Condition != tc.cond || f.Evidence != tc.line {
			t.Errorf("Classify(%q) = %+v, %v; want event %q condition %q", tc.line, f, ok, tc.event, tc.cond)
		}
	}
	for _, quiet := range []string{
		"oom_reaper: reaped process 812 (probe), now anon-rss:0kB",
		"probe invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=999",
		"EXT4-fs (vda4): mounted filesystem 1b2c with ordered data mode. Quota mode: none.",
		"INFO: task hung? no",
		"XFS (vdb): Mounting V5 Filesystem",
		"audit: type=1400 Killed process 1 (x)x", // an audit line quoting the words, mid-line
	} {
		if f, ok := Classify(quiet); ok {
			t.Errorf("Classify(%q) = %+v, want nothing", quiet, f)
		}
	}
}
