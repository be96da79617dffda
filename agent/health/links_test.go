package health

import (
	"strings"
	"testing"
	"time"
)

func TestLinksReportCarrierLossAndReturn(t *testing.T) {
	var l Links
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	eth0 := Link{Index: 2, Name: "eth0", MAC: "00:16:3e:00:00:01", Watched: true, Up: true, Carrier: true}
	if fs := l.Observe(t0, eth0); fs != nil {
		t.Fatalf("a link with carrier: %+v", fs)
	}
	// Not ours: a veth losing its peer, a NIC the node set down.
	if fs := l.Observe(t0, Link{Index: 9, Name: "veth1", Up: true}); fs != nil {
		t.Fatalf("veth: %+v", fs)
	}
	if fs := l.Observe(t0, Link{Index: 3, Name: "eth1", Watched: true}); fs != nil {
		t.Fatalf("eth1 set down: %+v", fs)
	}
	lost := eth0
	lost.Carrier = false
	fs := l.Observe(t0.Add(time.Second), lost)
	if len(fs) != 1 || fs[0].Event != NICLinkDown || fs[0].Status != "True" ||
		fs[0].Evidence != "eth0 (00:16:3e:00:00:01): carrier lost at 2026-12-03T08:00:01Z (IFF_LOWER_UP cleared while the link is up)" {
		t.Fatalf("carrier lost: %+v", fs)
	}
	// A repeat of the same state is no news.
	if fs := l.Observe(t0.Add(2*time.Second), lost); fs != nil {
		t.Fatalf("repeat: %+v", fs)
	}
	// A second NIC down too; the first back: still True, naming the other.
	eth1 := Link{Index: 3, Name: "eth1", Watched: true, Up: true}
	if fs := l.Observe(t0.Add(3*time.Second), eth1); len(fs) != 1 || !strings.Contains(fs[0].Evidence, "also without carrier: eth0 since") {
		t.Fatalf("second down: %+v", fs)
	}
	fs = l.Observe(t0.Add(21*time.Second), eth0)
	if len(fs) != 1 || fs[0].Status != "True" || fs[0].Event != "" || !strings.HasPrefix(fs[0].Evidence, "eth0: carrier back after 20s; also without carrier: eth1") {
		t.Fatalf("first back: %+v", fs)
	}
	// The last one detached: False.
	eth1.Deleted = true
	fs = l.Observe(t0.Add(30*time.Second), eth1)
	if len(fs) != 1 || fs[0].Status != "False" || fs[0].Reason != "NICLinksUp" || !strings.HasPrefix(fs[0].Evidence, "eth1: detached after 27s") {
		t.Fatalf("last back: %+v", fs)
	}
}
