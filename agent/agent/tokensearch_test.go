package agent

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/ignition"
)

// TestTokenSearchBudget: a file of plain contents (within the config's
// budget: 2.5 MiB) that holds 40 gzip streams of 64 MiB of zeros each
// would have the search for copies of the token inflate 2.5 GiB; it
// inflates at most 128 MiB for the whole config and then refuses the
// config at the entry where it stopped, as a copy could hide in the rest.
// Before the shared budget, `drover validate` on such a user-data of
// 14 KB was still running when stopped after ten minutes.
func TestTokenSearchBudget(t *testing.T) {
	stream := gzipped(t, make([]byte, 64<<20))
	blob := bytes.Repeat(stream, 40)
	ud := withToken(t, "", []any{file("/var/lib/app/blobs", "data:;base64,"+base64.StdEncoding.EncodeToString(blob))}, nil, nil)
	start := time.Now()
	ps := ignition.Validate(ud, Options(nil))
	t.Logf("refused in %v: %v", time.Since(start).Round(time.Millisecond), ps)
	want := "the gzip streams they hold expand past 128 MiB in total, so the agent cannot tell whether the token is copied there"
	if len(ps) != 1 || ps[0].Path != "$.storage.files[2].contents" || !strings.Contains(ps[0].Message, want) {
		t.Errorf("got %v, want one problem at $.storage.files[2].contents: %s", ps, want)
	}

	// One such stream is searched in full (it is within the budget) and
	// the config accepted.
	ud = withToken(t, "", []any{file("/var/lib/app/blob.gz", "data:;base64,"+base64.StdEncoding.EncodeToString(stream))}, nil, nil)
	if ps := ignition.Validate(ud, Options(nil)); len(ps) != 0 {
		t.Errorf("one 64 MiB gzip file: %v", ps)
	}
}
