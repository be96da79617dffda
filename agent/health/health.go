// Package health turns the kernel's evidence of a sick node into what a
// node pool can act on: Node conditions and Events, each carrying the
// kernel's own line. It is node-problem-detector's kernel monitor cut down
// to the problems an immutable node can have, and pure: the agent feeds it
// /dev/kmsg records and sends what it finds (agent/agent, health.go).
//
// What it reports (docs/agent.md, "Health"):
//
//	Event OOMKilling          the kernel's OOM killer killed a process (a
//	                          container past its memory limit, or the node
//	                          out of memory)
//	Event TaskHung            a task blocked in the kernel for longer than
//	                          hung_task_timeout_secs
//	Event FilesystemError     a filesystem reported an error
//	Condition ReadonlyFilesystem=True (FilesystemIsReadOnly)
//	                          a filesystem was remounted read-only after an
//	                          error; only a reboot clears it, so the agent
//	                          sets it False at each start and True on the
//	                          first such line
//
// and, from other evidence than the kernel's log:
//
//	NICLinkDown (links.go)    a NIC lost its carrier (Event and condition)
//	FrequentContainerdRestart, FrequentKubeletRestart (restarts.go)
//	                          systemd restarted the daemon 5 times in 20
//	                          minutes (Event and condition)
package health

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/drover-os/drover/nodecontract"
)

// Record is one /dev/kmsg record: "PRI,SEQ,USEC,FLAGS;MESSAGE", followed by
// continuation lines (" KEY=VALUE") that carry no evidence of their own.
type Record struct {
	Seq     uint64
	Usec    uint64 // microseconds since boot
	Message string
}

// ParseRecord reads one record as read(2) on /dev/kmsg returns it; ok is
// false for anything else.
func ParseRecord(b string) (r Record, ok bool) {
	head, msg, found := strings.Cut(b, ";")
	if !found {
		return Record{}, false
	}
	f := strings.Split(head, ",")
	if len(f) < 3 {
		return Record{}, false
	}
	seq, err1 := strconv.ParseUint(f[1], 10, 64)
	usec, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return Record{}, false
	}
	msg, _, _ = strings.Cut(msg, "\n")
	return Record{Seq: seq, Usec: usec, Message: msg}, true
}

// Finding is what one kernel line means for the Node: an Event, a
// condition, or both.
type Finding struct {
	// Event is the Warning Event's reason ("" for none).
	Event string
	// Condition is the condition set ("" for none) to Status ("" is
	// "True"), with Reason.
	Condition, Status, Reason string
	// Evidence is the kernel's line, as it logged it, or what the other
	// sources saw.
	Evidence string
	// Kernel: Evidence is a line of the kernel's log.
	Kernel bool
}

// Condition types the agent owns, with the reason each has while False.
const (
	ReadonlyFilesystem = nodecontract.ConditionReadonlyFilesystem
)

var rules = []struct {
	re                       *regexp.Regexp
	event, condition, reason string
}{
	// mm/oom_kill.c: "Out of memory: Killed process …" (the node) and
	// "Memory cgroup out of memory: Killed process …" (a cgroup's limit).
	{regexp.MustCompile(`(?:^|: )Killed process \d+ \(.*\)`), "OOMKilling", "", ""},
	// kernel/hung_task.c.
	{regexp.MustCompile(`^INFO: task .+:\d+ blocked for more than \d+ seconds\.`), "TaskHung", "", ""},
	// ext4 (ext4_handle_error) and XFS (xfs_do_force_shutdown) remounting
	// or shutting down after an error: the filesystem takes no more writes.
	{regexp.MustCompile(`^EXT4-fs \(.+\): Remounting filesystem read-only`), "FilesystemError", ReadonlyFilesystem, "FilesystemIsReadOnly"},
	{regexp.MustCompile(`^XFS \(.+\): .*[Ss]hutting down filesystem`), "FilesystemError", ReadonlyFilesystem, "FilesystemIsReadOnly"},
	// The error itself (the remount, when errors=remount-ro, follows).
	{regexp.MustCompile(`^(?:EXT4-fs error|EXT4-fs \(.+\): error|XFS \(.+\): .*[Cc]orruption|BTRFS error) `), "FilesystemError", "", ""},
}

// Classify says what a kernel message is evidence of; ok is false for the
// lines that are none.
func Classify(msg string) (f Finding, ok bool) {
	for _, r := range rules {
		if r.re.MatchString(msg) {
			return Finding{Event: r.event, Condition: r.condition, Reason: r.reason, Evidence: msg, Kernel: true}, true
		}
	}
	return Finding{}, false
}
