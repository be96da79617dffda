package nodeconfig

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestFactsCheckCharacters: instance and region IDs are tokens of ASCII
// letters, digits, '-' and '_'; the characters next to each range are not.
func TestFactsCheckCharacters(t *testing.T) {
	ok := Facts{InstanceID: "i-azAZ09_", RegionID: "cn-azAZ09_x", ZoneID: "cn-hangzhou-h", InstanceType: "ecs.g7.xlarge"}
	if err := ok.Check(); err != nil {
		t.Fatalf("Check(%+v) = %v", ok, err)
	}
	for _, r := range "`{@[/:.é " {
		f := ok
		f.InstanceID = "i-" + string(r) + "1"
		want := `metadata instance-id "` + f.InstanceID + `" has characters other than letters, digits, '-' and '_'`
		if err := f.Check(); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("instance-id %q: Check() = %v, want ...%s", f.InstanceID, err, want)
		}
	}
	for _, tc := range []struct {
		region string
		valid  bool
	}{
		{"cn-hangzhou", true},
		{"cn.hangzhou", false}, // a label value, but not a token
		{"-cn", false},         // a token, but not a label value
		{"", false},
	} {
		f := ok
		f.RegionID = tc.region
		err := f.Check()
		if tc.valid != (err == nil) {
			t.Errorf("region-id %q: Check() = %v", tc.region, err)
		}
		if tc.region != "" && err != nil && !strings.HasSuffix(err.Error(), `metadata region-id "`+tc.region+`" is not a valid label value`) {
			t.Errorf("region-id %q: Check() = %v", tc.region, err)
		}
		if tc.region == "" && (err == nil || !strings.HasSuffix(err.Error(), "metadata region-id is empty")) {
			t.Errorf("empty region-id: Check() = %v", err)
		}
	}
}

func TestFactsCheckFields(t *testing.T) {
	base := Facts{InstanceID: "i-1", RegionID: "cn-hangzhou"}
	host253 := strings.Repeat("a.", 126) + "A"
	for _, tc := range []struct {
		name string
		edit func(*Facts)
		want string // "" when accepted
	}{
		{"bare", func(*Facts) {}, ""},
		{"bad instance type", func(f *Facts) { f.InstanceType = "ecs g7" }, `metadata instance/instance-type "ecs g7" is not a valid label value`},
		{"hostname of 253 characters, upper case", func(f *Facts) { f.Hostname = host253 }, ""},
		{"hostname of 254 characters", func(f *Facts) { f.Hostname = "a" + host253 }, `metadata hostname "a` + host253 + `" is not a valid node name (a DNS subdomain)`},
		{"build ID", func(f *Facts) { f.BuildID = "20261203.1-abc" }, ""},
		{"bad build ID", func(f *Facts) { f.BuildID = "build 7" }, `metadata BUILD_ID (/usr/lib/os-release) "build 7" is not a valid label value`},
		{"IPv4", func(f *Facts) { f.PrivateIPv4 = "10.0.0.1" }, ""},
		{"not an address", func(f *Facts) { f.PrivateIPv4 = "10.0.0" }, `metadata private-ipv4 "10.0.0" is not an IPv4 address`},
		{"everything wrong", func(f *Facts) { *f = Facts{ZoneID: "-", InstanceType: "-", PrivateIPv4: "x"} },
			"metadata instance-id is empty\nmetadata region-id is empty\nmetadata zone-id \"-\" is not a valid label value\n" +
				"metadata instance/instance-type \"-\" is not a valid label value\nmetadata private-ipv4 \"x\" is not an IPv4 address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			tc.edit(&f)
			err := f.Check()
			if tc.want == "" {
				if err != nil {
					t.Errorf("Check() = %v", err)
				}
				return
			}
			want := "checking ECS instance facts (compare with the instance in the ECS console): " + tc.want
			if err == nil || err.Error() != want {
				t.Errorf("Check() = %v\nwant %s", err, want)
			}
		})
	}
}

// TestNodeLabels: fact labels are added to the user's, a user label equal
// to the instance's is no conflict, and facts the metadata lacks add none.
func TestNodeLabels(t *testing.T) {
	c := load(t, "minimal")
	c.Kubelet.Labels = map[string]string{LabelZone: facts.ZoneID, "example.com/a": "b"}
	f := facts
	f.SecureBoot = "true"
	f.BuildID, f.ConfigDigest = "0123456789abcdef", "2b436b32c597f0b5c7ae9b27721eb38550330d70"
	got, err := NodeLabels(c, f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"example.com/a": "b",
		LabelZone:       "cn-hangzhou-h", LabelRegion: "cn-hangzhou", LabelInstanceType: "ecs.g7.xlarge", LabelSecureBoot: "true",
		LabelBuildID: "0123456789abcdef", LabelNodeConfig: "2b436b32c597f0b5c7ae9b27721eb38550330d70",
	}
	if !equalMaps(got, want) {
		t.Errorf("NodeLabels = %v, want %v", got, want)
	}
	if len(c.Kubelet.Labels) != 2 {
		t.Errorf("NodeLabels changed the Config's labels: %v", c.Kubelet.Labels)
	}
	got, err = NodeLabels(load(t, "minimal"), Facts{InstanceID: "i-1", RegionID: "r"})
	if err != nil || !equalMaps(got, map[string]string{LabelRegion: "r"}) {
		t.Errorf("NodeLabels with bare facts = %v, %v", got, err)
	}
	if _, err := NodeLabels(c, Facts{RegionID: "r"}); err == nil || !strings.Contains(err.Error(), "instance-id is empty") {
		t.Errorf("NodeLabels with bad facts: %v", err)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestKubeletFlagsNodeIPForms: the node IP is written canonically; a zone or
// a bad private IPv4 (when no node IP is given) is refused.
func TestKubeletFlagsNodeIPForms(t *testing.T) {
	c := load(t, "minimal")
	flags, err := KubeletFlags(c, facts, "FD00::0001")
	if err != nil {
		t.Fatal(err)
	}
	if !containsFlag(flags, "--node-ip=fd00::1") {
		t.Errorf("flags %v lack --node-ip=fd00::1", flags)
	}
	if _, err := KubeletFlags(c, facts, "fe80::1%eth0"); err == nil || err.Error() != `rendering the kubelet flags: node IP "fe80::1%eth0" is not an IP address` {
		t.Errorf("zoned node IP: %v", err)
	}
	if _, err := KubeletFlags(c, Facts{RegionID: "r"}, ""); err == nil || !strings.HasPrefix(err.Error(), "rendering the kubelet flags: checking ECS instance facts") {
		t.Errorf("bad facts: %v", err)
	}
}

func containsFlag(flags []string, f string) bool {
	for _, x := range flags {
		if x == f {
			return true
		}
	}
	return false
}

// TestPinnedCAPicksTheMatchingCertificate: of a bundle, only the pinned
// certificate is kept, whatever else the bundle holds before it.
func TestPinnedCAPicksTheMatchingCertificate(t *testing.T) {
	ca, err := os.ReadFile("../../testdata/pki/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
	got, err := PinnedCA(append(key, ca...), strings.ToUpper(pin[:7])+pin[7:])
	if err != nil || !bytes.Equal(got, ca) {
		t.Errorf("PinnedCA(key + ca, upper-case pin) = %q, %v; want the CA", got, err)
	}
	broken := []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	if _, err := PinnedCA(append(broken, ca...), pin); err == nil || !strings.HasPrefix(err.Error(), "computing the CA pin: parsing the certificate: ") {
		t.Errorf("PinnedCA(broken + ca) = %v, want the parse error", err)
	}
	if _, err := CAHash(key); err == nil || err.Error() != "computing the CA pin: no PEM CERTIFICATE block found" {
		t.Errorf("CAHash(key) = %v", err)
	}
}
