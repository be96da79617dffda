package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	cis "github.com/drover-os/drover/harness/registry/programs/cisevidence"
)

// The probe's "cis" mode reads what the CIS benchmark's node checks audit
// (harness/cis judges it; its Evidence type is this report's shape): the
// running kubelet's command line, how systemd loaded its unit, the mode
// and owner of every file those and the kubelet's loaded configuration
// name, that configuration from the kubelet's own /configz, which TLS 1.2
// cipher suites its API accepts, and any kube-proxy on the node.

// configzFields are the KubeletConfiguration fields the checks read; the
// rest of /configz is left out to keep the report within the 4 KiB
// termination message.
var configzFields = []string{"authentication", "authorization", "readOnlyPort", "streamingConnectionIdleTimeout",
	"protectKernelDefaults", "makeIPTablesUtilChains", "eventRecordQPS", "tlsCertFile", "tlsPrivateKeyFile",
	"tlsCipherSuites", "tlsMinVersion", "rotateCertificates", "serverTLSBootstrap", "featureGates", "podPidsLimit"}

// kubeletAPI is the kubelet's API as the node itself reaches it.
const kubeletAPI = "127.0.0.1:10250"

// saToken is the pod's service account token: the harness grants its
// account get on nodes/configz and nodes/proxy, which the kubelet checks
// with the API server (webhook authorization) as it does for the API
// server's node proxy.
const saToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"

func cisEvidence() cis.Evidence {
	r := cis.Evidence{Files: map[string]cis.File{}}
	fail := func(err error) { r.Errors = append(r.Errors, err.Error()) }
	pid, err := mainPID("kubelet.service")
	if err != nil {
		fail(err)
	} else if r.KubeletArgs, err = cmdline(pid); err != nil {
		fail(err)
	}
	if r.Unit, err = unitFiles("kubelet.service"); err != nil {
		fail(err)
	}
	flags := flagValues(r.KubeletArgs)
	cert, key := flags["tls-cert-file"], flags["tls-private-key-file"]
	if cert == "" && flags["cert-dir"] != "" {
		cert, key = path.Join(flags["cert-dir"], "kubelet.crt"), path.Join(flags["cert-dir"], "kubelet.key")
	}
	r.Configz, err = configz(cert)
	if err != nil {
		r.ConfigzError = err.Error()
	}
	files := append(r.Unit.Paths(), flags["config"], flags["kubeconfig"], flags["client-ca-file"], cert, key)
	if auth, ok := r.Configz["authentication"].(map[string]any); ok {
		if x509, ok := auth["x509"].(map[string]any); ok {
			ca, _ := x509["clientCAFile"].(string)
			files = append(files, ca)
		}
	}
	for _, k := range []string{"tlsCertFile", "tlsPrivateKeyFile"} {
		p, _ := r.Configz[k].(string)
		files = append(files, p)
	}
	for _, p := range files {
		if p != "" {
			r.Files[p] = statFile(hostRoot, p)
		}
	}
	r.TLS12Offered, r.TLS12Accepted = tls12Suites(kubeletAPI)
	r.KubeProxy = kubeProxies()
	for _, kp := range r.KubeProxy {
		if kp.Kubeconfig != "" {
			r.Files[kp.Kubeconfig] = statFile(fmt.Sprintf("/proc/%d/root", kp.PID), kp.Kubeconfig)
		}
	}
	return r
}

// mainPID is a unit's MainPID, as the node's systemctl shows it.
func mainPID(unit string) (int, error) {
	o, err := hostCommand("/usr/bin/systemctl", "show", "-p", "MainPID", "--value", unit)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(o))
	if err != nil || pid == 0 {
		return 0, fmt.Errorf("%s has no main process (MainPID %q)", unit, strings.TrimSpace(o))
	}
	return pid, nil
}

func cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}

// unitFiles is how systemd resolved unit: its fragment, drop-ins and
// environment files ("EnvironmentFiles=/etc/default/kubelet (ignore_errors=no)").
func unitFiles(unit string) (cis.Unit, error) {
	var u cis.Unit
	o, err := hostCommand("/usr/bin/systemctl", "show", "-p", "FragmentPath,DropInPaths,EnvironmentFiles", unit)
	if err != nil {
		return u, err
	}
	for _, l := range strings.Split(o, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
		switch k {
		case "FragmentPath":
			u.Fragment = v
		case "DropInPaths":
			u.DropIns = strings.Fields(v)
		case "EnvironmentFiles":
			if f := strings.Fields(v); len(f) > 0 {
				u.EnvFiles = append(u.EnvFiles, strings.TrimPrefix(f[0], "-"))
			}
		}
	}
	return u, nil
}

// flagValues reads --name=value and --name value from a command line.
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 1; i < len(args); i++ {
		name, value, ok := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		if !ok && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			value = args[i]
		}
		out[name] = value
	}
	return out
}

// statFile stats p under root (following a link, as the kubelet opens it)
// and says where a link points.
func statFile(root, p string) cis.File {
	var f cis.File
	if t, err := os.Readlink(filepath.Join(root, p)); err == nil {
		f.Link = t
	}
	fi, err := os.Stat(filepath.Join(root, p))
	if os.IsNotExist(err) {
		f.Missing = true
		return f
	}
	if err != nil {
		f.Error = err.Error()
		return f
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		f.Error = "no stat_t"
		return f
	}
	f.Mode, f.UID, f.GID = st.Mode&0o7777, st.Uid, st.Gid
	return f
}

// configz GETs the kubelet's /configz with the pod's service account token
// and keeps configzFields of its "kubeletconfig". The kubelet's serving
// certificate is pinned to the first certificate of certFile (on the
// node): the token goes to the kubelet and nothing else.
func configz(certFile string) (map[string]any, error) {
	token, err := os.ReadFile(saToken)
	if err != nil {
		return nil, fmt.Errorf("the pod's service account token: %w", err)
	}
	if certFile == "" {
		return nil, fmt.Errorf("no serving certificate file to pin the kubelet's to (no --tls-cert-file or --cert-dir)")
	}
	pemBytes, err := os.ReadFile(filepath.Join(hostRoot, certFile))
	if err != nil {
		return nil, fmt.Errorf("the kubelet's serving certificate: %w", err)
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, fmt.Errorf("%s holds no PEM certificate", certFile)
	}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], blk.Bytes) {
				return fmt.Errorf("the kubelet's certificate is not the one in %s", certFile)
			}
			return nil
		},
	}}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+kubeletAPI+"/configz", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /configz: %s: %.200s", resp.Status, body)
	}
	var doc struct {
		KubeletConfig map[string]any `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.KubeletConfig == nil {
		return nil, fmt.Errorf("GET /configz: no kubeletconfig object in %.200s", body)
	}
	out := map[string]any{}
	for _, k := range configzFields {
		if v, ok := doc.KubeletConfig[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// tls12Suites offers every TLS 1.2 cipher suite Go knows, one per
// handshake, to addr and lists the ones it accepted. No credentials are
// sent: a completed handshake is all it asks.
func tls12Suites(addr string) (offered int, accepted []string) {
	accepted = []string{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !supports(s.SupportedVersions, tls.VersionTLS12) {
			continue
		}
		offered++
		d := &net.Dialer{Timeout: 10 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true,
			MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{s.ID}})
		if err != nil {
			continue
		}
		if c.ConnectionState().CipherSuite == s.ID {
			accepted = append(accepted, s.Name)
		}
		c.Close()
	}
	return offered, accepted
}

func supports(vs []uint16, v uint16) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// kubeProxies lists the kube-proxy processes on the node and the
// --kubeconfig each names.
func kubeProxies() []cis.KubeProxy {
	out := []cis.KubeProxy{}
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, c := range comms {
		b, err := os.ReadFile(c)
		if err != nil || strings.TrimSpace(string(b)) != "kube-proxy" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(c)))
		args, _ := cmdline(pid)
		out = append(out, cis.KubeProxy{PID: pid, Kubeconfig: flagValues(args)["kubeconfig"]})
	}
	return out
}
