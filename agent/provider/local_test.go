package provider

import (
	"bytes"
	"compress/gzip"
	"context"
	"strings"
	"testing"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const fwUserData = "sys/firmware/qemu_fw_cfg/by_name/opt/drover/userdata/raw"
const fwFacts = "sys/firmware/qemu_fw_cfg/by_name/opt/drover/facts/raw"

func TestQEMU(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	q := &QEMU{Root: root}

	if data, present, err := q.UserData(ctx); data != nil || present || err != nil {
		t.Errorf("no fw_cfg: %q, %v, %v; want not present", data, present, err)
	}
	if f, err := q.Facts(ctx); f != (Facts{}) || err != nil {
		t.Errorf("no facts entry: %+v, %v; want empty", f, err)
	}

	compressed := gz(t, []byte(`{"ignition":{"version":"3.4.0"}}`))
	writeFile(t, root, fwUserData, string(compressed))
	writeFile(t, root, fwFacts, `{"instance-id":"i-q","region-id":"local","hostname":"vm1"}`)
	data, present, err := q.UserData(ctx)
	if !bytes.Equal(data, compressed) || !present || err != nil {
		t.Errorf("gzip fw_cfg: %q, %v, %v; want the compressed bytes as given", data, present, err)
	}
	f, err := q.Facts(ctx)
	if err != nil || f != (Facts{InstanceID: "i-q", RegionID: "local", Hostname: "vm1"}) || f.ProviderID() != "local.i-q" {
		t.Errorf("facts = %+v, %v", f, err)
	}

	writeFile(t, root, fwFacts, `{"instance_id":"typo"}`)
	if _, err := q.Facts(ctx); err == nil || !strings.Contains(err.Error(), "instance_id") {
		t.Errorf("facts with an unknown key: %v, want an error naming it", err)
	}
}

func TestFile(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	writeFile(t, root, "etc/drover/config.ign", "config")
	writeFile(t, root, "etc/drover/facts.json", `{"zone-id":"z1"}`)

	f := &File{Root: root, Path: "/etc/drover/config.ign", FactsPath: "/etc/drover/facts.json"}
	data, present, err := f.UserData(ctx)
	if string(data) != "config" || !present || err != nil {
		t.Errorf("UserData = %q, %v, %v", data, present, err)
	}
	if facts, err := f.Facts(ctx); err != nil || facts != (Facts{ZoneID: "z1"}) {
		t.Errorf("Facts = %+v, %v", facts, err)
	}

	// ".." cannot climb out of the root: this resolves to <root>/etc/drover/config.ign.
	f.Path = "/../../etc/drover/config.ign"
	if data, _, err := f.UserData(ctx); string(data) != "config" || err != nil {
		t.Errorf("UserData with leading ..: %q, %v", data, err)
	}

	f.Path = "/etc/drover/missing.ign"
	if _, _, err := f.UserData(ctx); err == nil || !strings.Contains(err.Error(), "drover.config=/etc/drover/missing.ign") {
		t.Errorf("missing file: %v, want an error naming the kernel argument", err)
	}
	f.Path = "relative.ign"
	if _, _, err := f.UserData(ctx); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("relative path: %v", err)
	}
	if facts, err := (&File{Root: root}).Facts(ctx); err != nil || facts != (Facts{}) {
		t.Errorf("no drover.facts: %+v, %v", facts, err)
	}
}

// TestLocalUserDataLimit: fw_cfg and file user-data are bounded as given,
// and returned as given (gzip included) up to the bound.
func TestLocalUserDataLimit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	f := &File{Root: root, Path: "/etc/c.ign"}
	q := &QEMU{Root: root}
	atLimit := gz(t, nil)
	atLimit = append(atLimit, bytes.Repeat([]byte("x"), maxLocalUserData-len(atLimit))...)
	writeFile(t, root, "etc/c.ign", string(atLimit))
	writeFile(t, root, fwUserData, string(atLimit))
	for _, p := range []Provider{f, q} {
		if data, present, err := p.UserData(ctx); !bytes.Equal(data, atLimit) || !present || err != nil {
			t.Errorf("%s at the limit: %d bytes, %v, %v", p.Name(), len(data), present, err)
		}
	}
	writeFile(t, root, "etc/c.ign", string(atLimit)+"x")
	writeFile(t, root, fwUserData, string(atLimit)+"x")
	for _, p := range []Provider{f, q} {
		if _, _, err := p.UserData(ctx); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("%s beyond the limit: %v", p.Name(), err)
		}
	}
}
