package cis

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
)

// droverNode is the evidence of a drover node as the probe reports it
// (shape and values from a smoke run's probe).
func droverNode() Evidence {
	const configz = `{
	  "authentication": {"x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
	    "webhook": {"enabled": true, "cacheTTL": "2m0s"}, "anonymous": {"enabled": false}},
	  "authorization": {"mode": "Webhook", "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"}},
	  "streamingConnectionIdleTimeout": "4h0m0s",
	  "protectKernelDefaults": true,
	  "makeIPTablesUtilChains": true,
	  "eventRecordQPS": 50,
	  "tlsCipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"],
	  "rotateCertificates": true,
	  "podPidsLimit": 4096
	}`
	var cz map[string]any
	if err := json.Unmarshal([]byte(configz), &cz); err != nil {
		panic(err)
	}
	root := func(mode uint32) File { return File{Mode: mode} }
	return Evidence{
		KubeletArgs: []string{"/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
			"--cert-dir=/var/lib/kubelet/pki", "--config=/etc/kubernetes/kubelet-config.yaml",
			"--kubeconfig=/var/lib/kubelet/kubeconfig", "--hostname-override=izbp1drover0smoke0z", "--node-ip=100.64.0.15"},
		Unit: Unit{Fragment: "/usr/lib/systemd/system/kubelet.service",
			DropIns:  []string{"/etc/systemd/system/kubelet.service.d/50-smoke.conf"},
			EnvFiles: []string{"/etc/default/kubelet"}},
		Files: map[string]File{
			"/usr/lib/systemd/system/kubelet.service":             root(0o644),
			"/etc/systemd/system/kubelet.service.d/50-smoke.conf": root(0o644),
			"/etc/default/kubelet":                                root(0o644),
			"/var/lib/kubelet/kubeconfig":                         root(0o600),
			"/etc/kubernetes/pki/ca.crt":                          root(0o644),
			"/etc/kubernetes/kubelet-config.yaml":                 root(0o644),
			"/var/lib/kubelet/pki/kubelet.crt":                    root(0o644),
			"/var/lib/kubelet/pki/kubelet.key":                    root(0o600),
		},
		Configz:       cz,
		TLS12Accepted: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"},
		TLS12Offered:  23,
	}
}

func statuses(rs []Result) map[string]Status {
	out := map[string]Status{}
	for _, r := range rs {
		out[r.Benchmark+" "+r.ID] = r.Status
	}
	return out
}

func TestDroverNodePasses(t *testing.T) {
	rs := Judge(droverNode())
	want := map[string]Status{
		"CIS ACK 1.0 4.1.1": Pass, "CIS ACK 1.0 4.1.2": Pass, "CIS ACK 1.0 4.1.3": NotApplicable,
		"CIS ACK 1.0 4.1.4": NotApplicable, "CIS ACK 1.0 4.1.5": Pass, "CIS ACK 1.0 4.1.6": Pass,
		"CIS ACK 1.0 4.1.7": Pass, "CIS ACK 1.0 4.1.8": Pass, "CIS ACK 1.0 4.1.9": Pass,
		"CIS ACK 1.0 4.1.10": Pass, "CIS ACK 1.0 4.2.1": Pass, "CIS ACK 1.0 4.2.2": Pass, "CIS ACK 1.0 4.2.3": Pass,
		"CIS ACK 1.0 4.2.4": Pass, "CIS ACK 1.0 4.2.5": Pass, "CIS ACK 1.0 4.2.6": Pass,
		"CIS ACK 1.0 4.2.7": Pass, "CIS ACK 1.0 4.2.8": Pass, "CIS ACK 1.0 4.2.9": Pass,
		"CIS ACK 1.0 4.2.10": Pass, "CIS Kubernetes 1.9 4.2.10": Pass,
		"CIS Kubernetes 1.9 4.2.11": NotApplicable, "CIS Kubernetes 1.9 4.2.13": Pass,
	}
	got := statuses(rs)
	if len(got) != len(want) || len(rs) != len(want) {
		t.Errorf("%d results (%d distinct), want %d", len(rs), len(got), len(want))
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %s, want %s", id, got[id], w)
		}
	}
	for _, r := range rs {
		t.Log(r)
		if r.Evidence == "" {
			t.Errorf("%s %s: no evidence", r.Benchmark, r.ID)
		}
		if r.Kind == Manual && r.Status == Pass && !strings.Contains(r.Evidence, "operator: ") {
			t.Errorf("%s %s: manual without advice: %s", r.Benchmark, r.ID, r.Evidence)
		}
	}
	line, failed := Summary(rs)
	if len(failed) != 0 || line != "CIS ACK 1.0 worker node (+ CIS Kubernetes 1.9 kubelet checks): 20 pass, 3 not applicable" {
		t.Errorf("summary %q, failed %v", line, failed)
	}
}

// TestBrokenFails breaks one thing at a time on the drover node: the named
// check, and no other, must fail, its evidence naming what broke.
func TestBrokenFails(t *testing.T) {
	set := func(path string, v any) func(*Evidence) {
		return func(e *Evidence) {
			m := e.Configz
			keys := strings.Split(path, ".")
			for _, k := range keys[:len(keys)-1] {
				m = m[k].(map[string]any)
			}
			if v == nil {
				delete(m, keys[len(keys)-1])
			} else {
				m[keys[len(keys)-1]] = v
			}
		}
	}
	file := func(path string, fn func(*File)) func(*Evidence) {
		return func(e *Evidence) { f := e.Files[path]; fn(&f); e.Files[path] = f }
	}
	arg := func(a string) func(*Evidence) {
		return func(e *Evidence) { e.KubeletArgs = append(e.KubeletArgs, a) }
	}
	both := func(a, b func(*Evidence)) func(*Evidence) { return func(e *Evidence) { a(e); b(e) } }
	for _, tc := range []struct {
		name   string
		break_ func(*Evidence)
		fails  []string // Benchmark ID
		says   string   // in the first failure's evidence
	}{
		{"kubelet config group-writable", file("/etc/kubernetes/kubelet-config.yaml", func(f *File) { f.Mode = 0o664 }),
			[]string{"CIS ACK 1.0 4.1.9"}, "/etc/kubernetes/kubelet-config.yaml 0664 (bits 0020 beyond 0644)"},
		{"kubelet config setgid", file("/etc/kubernetes/kubelet-config.yaml", func(f *File) { f.Mode = 0o2644 }),
			[]string{"CIS ACK 1.0 4.1.9"}, "bits 2000"},
		{"kubelet config owned by a user", file("/etc/kubernetes/kubelet-config.yaml", func(f *File) { f.UID = 1000 }),
			[]string{"CIS ACK 1.0 4.1.10"}, "1000:0 (not root:root)"},
		{"kubelet config group not root", file("/etc/kubernetes/kubelet-config.yaml", func(f *File) { f.GID = 4 }),
			[]string{"CIS ACK 1.0 4.1.10"}, "0:4"},
		{"kubelet config missing", file("/etc/kubernetes/kubelet-config.yaml", func(f *File) { f.Missing = true }),
			[]string{"CIS ACK 1.0 4.1.9", "CIS ACK 1.0 4.1.10"}, "does not exist"},
		{"drop-in world-readable+writable", file("/etc/systemd/system/kubelet.service.d/50-smoke.conf", func(f *File) { f.Mode = 0o666 }),
			[]string{"CIS ACK 1.0 4.1.1"}, "50-smoke.conf 0666"},
		{"environment file not root's", file("/etc/default/kubelet", func(f *File) { f.UID = 5 }),
			[]string{"CIS ACK 1.0 4.1.2"}, "/etc/default/kubelet 5:0"},
		{"unit not loaded", func(e *Evidence) { e.Unit = Unit{} },
			[]string{"CIS ACK 1.0 4.1.1", "CIS ACK 1.0 4.1.2"}, "no unit file"},
		{"drop-in not stat'ed", func(e *Evidence) { delete(e.Files, "/etc/systemd/system/kubelet.service.d/50-smoke.conf") },
			[]string{"CIS ACK 1.0 4.1.1", "CIS ACK 1.0 4.1.2"}, "not examined"},
		{"kubeconfig 0660", file("/var/lib/kubelet/kubeconfig", func(f *File) { f.Mode = 0o660 }),
			[]string{"CIS ACK 1.0 4.1.5"}, "0660"},
		{"kubeconfig stat error", file("/var/lib/kubelet/kubeconfig", func(f *File) { f.Error = "permission denied" }),
			[]string{"CIS ACK 1.0 4.1.5", "CIS ACK 1.0 4.1.6"}, "permission denied"},
		{"no --kubeconfig", func(e *Evidence) { e.KubeletArgs = e.KubeletArgs[:4] },
			[]string{"CIS ACK 1.0 4.1.5", "CIS ACK 1.0 4.1.6"}, "without --kubeconfig"},
		{"CA owned by a user", file("/etc/kubernetes/pki/ca.crt", func(f *File) { f.UID = 1 }),
			[]string{"CIS ACK 1.0 4.1.8"}, "ca.crt 1:0"},
		{"CA 0646", file("/etc/kubernetes/pki/ca.crt", func(f *File) { f.Mode = 0o646 }),
			[]string{"CIS ACK 1.0 4.1.7"}, "0646"},
		{"kube-proxy with a loose kubeconfig", func(e *Evidence) {
			e.KubeProxy = []KubeProxy{{PID: 9, Kubeconfig: "/var/lib/kube-proxy/kubeconfig"}}
			e.Files["/var/lib/kube-proxy/kubeconfig"] = File{Mode: 0o664, GID: 7}
		}, []string{"CIS ACK 1.0 4.1.3", "CIS ACK 1.0 4.1.4"}, "0664"},
		{"anonymous on by flag", arg("--anonymous-auth"), []string{"CIS ACK 1.0 4.2.1"}, "--anonymous-auth=true (fails)"},
		{"anonymous on in configz", set("authentication.anonymous.enabled", true), []string{"CIS ACK 1.0 4.2.1"}, "enabled=true (fails)"},
		{"anonymous unset", set("authentication.anonymous", map[string]any{}), []string{"CIS ACK 1.0 4.2.1"}, "not set"},
		{"AlwaysAllow", set("authorization.mode", "AlwaysAllow"), []string{"CIS ACK 1.0 4.2.2"}, "mode=AlwaysAllow (fails)"},
		{"AlwaysAllow by flag", arg("--authorization-mode=Webhook,AlwaysAllow"), []string{"CIS ACK 1.0 4.2.2"}, "AlwaysAllow (fails)"},
		{"no client CA", set("authentication.x509", map[string]any{}),
			[]string{"CIS ACK 1.0 4.1.7", "CIS ACK 1.0 4.1.8", "CIS ACK 1.0 4.2.3"}, "no client CA"},
		{"read-only port", set("readOnlyPort", 10255), []string{"CIS ACK 1.0 4.2.4"}, "readOnlyPort=10255 (fails)"},
		{"read-only port by flag", arg("--read-only-port=10255"), []string{"CIS ACK 1.0 4.2.4"}, "--read-only-port=10255 (fails)"},
		{"streams never time out", set("streamingConnectionIdleTimeout", "0s"), []string{"CIS ACK 1.0 4.2.5"}, "=0s (fails)"},
		{"streams never time out by flag", arg("--streaming-connection-idle-timeout=0"), []string{"CIS ACK 1.0 4.2.5"}, "(fails)"},
		{"kernel defaults not protected", set("protectKernelDefaults", nil), []string{"CIS ACK 1.0 4.2.6"}, "protectKernelDefaults not set"},
		{"kernel defaults off by flag", arg("--protect-kernel-defaults=false"), []string{"CIS ACK 1.0 4.2.6"}, "(fails)"},
		{"no iptables chains", set("makeIPTablesUtilChains", false), []string{"CIS ACK 1.0 4.2.7"}, "=false (fails)"},
		{"negative event qps", set("eventRecordQPS", -1), []string{"CIS ACK 1.0 4.2.8"}, "=-1 (fails)"},
		{"serving key readable", file("/var/lib/kubelet/pki/kubelet.key", func(f *File) { f.Mode = 0o640 }),
			[]string{"CIS ACK 1.0 4.2.9"}, "kubelet.key 0640"},
		{"serving key missing", file("/var/lib/kubelet/pki/kubelet.key", func(f *File) { f.Missing = true }),
			[]string{"CIS ACK 1.0 4.2.9"}, "does not exist"},
		{"only a cert file", set("tlsCertFile", "/etc/x.crt"), []string{"CIS ACK 1.0 4.2.9"}, "only one"},
		{"a CBC cipher configured", set("tlsCipherSuites", []any{"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"}),
			[]string{"CIS ACK 1.0 4.2.10"}, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA is not permitted"},
		{"cipher suites unset", set("tlsCipherSuites", nil), []string{"CIS ACK 1.0 4.2.10"}, "Go's defaults"},
		{"a CBC cipher accepted", func(e *Evidence) {
			e.TLS12Accepted = append(e.TLS12Accepted, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA")
		}, []string{"CIS ACK 1.0 4.2.10"}, "not permitted: TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"},
		{"ciphers not probed", func(e *Evidence) { e.TLS12Offered, e.TLS12Accepted = 0, nil },
			[]string{"CIS ACK 1.0 4.2.10"}, "not probed"},
		{"no rotation", set("rotateCertificates", false), []string{"CIS Kubernetes 1.9 4.2.10"}, "not set"},
		{"no rotation by flag", arg("--rotate-certificates=false"), []string{"CIS Kubernetes 1.9 4.2.10"}, "(fails)"},
		{"server rotation gate off", both(set("serverTLSBootstrap", true), set("featureGates", map[string]any{"RotateKubeletServerCertificate": false})),
			[]string{"CIS Kubernetes 1.9 4.2.11"}, "=false"},
		{"server rotation gate off by flag", both(set("serverTLSBootstrap", true), arg("--feature-gates=RotateKubeletServerCertificate=false")),
			[]string{"CIS Kubernetes 1.9 4.2.11"}, "--feature-gates"},
		{"no pod PID limit", set("podPidsLimit", nil), []string{"CIS Kubernetes 1.9 4.2.13"}, "podPidsLimit not set"},
		{"unlimited pod PIDs", set("podPidsLimit", -1), []string{"CIS Kubernetes 1.9 4.2.13"}, "=-1 (fails)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := droverNode()
			tc.break_(&ev)
			rs := Judge(ev)
			var got []string
			var first Result
			for _, r := range rs {
				if r.Status == Fail {
					if got == nil {
						first = r
					}
					got = append(got, r.Benchmark+" "+r.ID)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.fails, ",") {
				t.Fatalf("failed %v, want %v", got, tc.fails)
			}
			if !strings.Contains(first.Evidence, tc.says) {
				t.Errorf("%s evidence %q, want it to say %q", first.ID, first.Evidence, tc.says)
			}
			line, failed := Summary(rs)
			if len(failed) != len(tc.fails) || !strings.Contains(line, "FAILED: "+tc.fails[0]) {
				t.Errorf("summary %q does not name %s", line, tc.fails[0])
			}
		})
	}
}

// TestNoConfigz: without the kubelet's loaded configuration every setting
// check fails and says why; the file checks still judge.
func TestNoConfigz(t *testing.T) {
	ev := droverNode()
	ev.Configz, ev.ConfigzError = nil, "GET https://127.0.0.1:10250/configz: 403 Forbidden"
	for _, r := range Judge(ev) {
		isFile := strings.HasPrefix(r.ID, "4.1.") && r.ID != "4.1.7" && r.ID != "4.1.8"
		switch {
		case isFile && r.Status == Fail:
			t.Errorf("%s failed without configz: %s", r.ID, r.Evidence)
		case !isFile && r.Status != Fail:
			t.Errorf("%s %s %s without configz", r.Benchmark, r.ID, r.Status)
		case !isFile && !strings.Contains(r.Evidence, "403 Forbidden"):
			t.Errorf("%s: evidence %q does not say why configz is missing", r.ID, r.Evidence)
		}
	}
	ev.Configz = map[string]any{"readOnlyPort": "not a number"}
	for _, r := range Judge(ev) {
		if r.ID == "4.2.1" && (r.Status != Fail || !strings.Contains(r.Evidence, "not a KubeletConfiguration")) {
			t.Errorf("undecodable configz: %s", r)
		}
	}
}

func TestParseFlags(t *testing.T) {
	got := parseFlags([]string{"/usr/bin/kubelet", "--config", "/etc/k.yaml", "--anonymous-auth", "-v=2",
		"--read-only-port=0", "--node-labels=a=b,c=d", "positional", "--", "--kubeconfig=x"})
	want := map[string]string{"config": "/etc/k.yaml", "anonymous-auth": "true", "v": "2", "read-only-port": "0", "node-labels": "a=b,c=d"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("--%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestModeBits(t *testing.T) {
	for m, want := range map[fs.FileMode]uint32{0o644: 0o644, fs.ModeSetgid | 0o755: 0o2755,
		fs.ModeSetuid | fs.ModeSticky | 0o700: 0o5700} {
		if got := ModeBits(m); got != want {
			t.Errorf("ModeBits(%v) = %04o, want %04o", m, got, want)
		}
	}
}

func TestCipherAllowed(t *testing.T) {
	for name, want := range map[string]bool{
		"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": true, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": true,
		"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": true, "TLS_RSA_WITH_AES_128_GCM_SHA256": true,
		"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": false, "TLS_RSA_WITH_AES_128_CBC_SHA256": false,
		"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": false, "": false,
	} {
		if got := cipherAllowed(name); got != want {
			t.Errorf("cipherAllowed(%q) = %v", name, got)
		}
	}
}
