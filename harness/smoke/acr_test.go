package smoke

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/credstatus"
	"github.com/drover-os/drover/harness/acrapi"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/registry"
	"github.com/drover-os/drover/internal/secretscan"
	"k8s.io/klog/v2/textlogger"
)

const helloDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func TestJudgePrivatePod(t *testing.T) {
	good := &cluster.Pod{Name: "acr-private", Phase: "Succeeded", ExitCodes: []int32{0},
		ImageIDs: []string{"100.64.0.2:5000/private/hello@" + helloDigest}}
	if _, err := JudgePrivatePod(good, helloDigest); err != nil {
		t.Errorf("good pod: %v", err)
	}
	for name, p := range map[string]*cluster.Pod{
		"pending":       {Phase: "Pending", Waiting: []cluster.Waiting{{Reason: "ErrImagePull"}}},
		"exit 1":        {Phase: "Succeeded", ExitCodes: []int32{1}, ImageIDs: good.ImageIDs},
		"a pull secret": {Phase: "Succeeded", ExitCodes: []int32{0}, ImageIDs: good.ImageIDs, PullSecrets: []string{"acr"}},
		"another image": {Phase: "Succeeded", ExitCodes: []int32{0}, ImageIDs: []string{"x@sha256:22"}},
		"no image id":   {Phase: "Succeeded", ExitCodes: []int32{0}},
		"no pod":        nil,
	} {
		if _, err := JudgePrivatePod(p, helloDigest); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgeACRPull(t *testing.T) {
	issued := []ecsmeta.STSCredentials{{Role: "r", AccessKeyID: "STS.a"}, {Role: "other", AccessKeyID: "STS.b"}}
	ours := acrapi.Login{Role: "r", InstanceID: "cri-x", AccessKeyID: "STS.a"}
	path := "/v2/private/hello/manifests/v1"
	refused := registry.Request{Method: "HEAD", Path: path}
	ok := registry.Request{Method: "HEAD", Path: path, Who: ACRWho(ours)}
	if d, err := JudgeACRPull([]registry.Request{refused, ok}, []acrapi.Login{ours}, issued, "r", "cri-x", "private/hello:v1"); err != nil ||
		!strings.Contains(d, "role r (ACR instance cri-x, login issued with STS key STS.a)") {
		t.Errorf("authorized pull: %q, %v", d, err)
	}
	otherRole := acrapi.Login{Role: "other", InstanceID: "cri-x", AccessKeyID: "STS.b"}
	foreignKey := acrapi.Login{Role: "r", InstanceID: "cri-x", AccessKeyID: "STS.forged"}
	for name, tc := range map[string]struct {
		reqs   []registry.Request
		logins []acrapi.Login
	}{
		"only refused":                {[]registry.Request{refused}, []acrapi.Login{ours}},
		"no request":                  {nil, []acrapi.Login{ours}},
		"another role's login":        {[]registry.Request{{Path: path, Who: ACRWho(otherRole)}}, []acrapi.Login{ours, otherRole}},
		"a key metadata never issued": {[]registry.Request{{Path: path, Who: ACRWho(foreignKey)}}, []acrapi.Login{foreignKey}},
		"another instance":            {[]registry.Request{ok}, []acrapi.Login{{Role: "r", InstanceID: "cri-y", AccessKeyID: "STS.a"}}},
		"another tag authorized":      {[]registry.Request{{Path: "/v2/private/hello/manifests/v2", Who: ACRWho(ours)}}, []acrapi.Login{ours}},
	} {
		if _, err := JudgeACRPull(tc.reqs, tc.logins, issued, "r", "cri-x", "private/hello:v1"); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgePullFailed(t *testing.T) {
	for _, reason := range []string{"ErrImagePull", "ImagePullBackOff"} {
		if err := JudgePullFailed(&cluster.Pod{Phase: "Pending", Waiting: []cluster.Waiting{{Reason: reason}}}); err != nil {
			t.Errorf("%s: %v", reason, err)
		}
	}
	for name, p := range map[string]*cluster.Pod{
		"ran":               {Phase: "Succeeded"},
		"creating":          {Phase: "Pending", Waiting: []cluster.Waiting{{Reason: "ContainerCreating"}}},
		"pending, no state": {Phase: "Pending"},
		"nil":               nil,
	} {
		if err := JudgePullFailed(p); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgeDetachedPull(t *testing.T) {
	path := "/v2/private/hello/manifests/v2"
	refused := []registry.Request{{Method: "HEAD", Path: path}, {Method: "HEAD", Path: path}}
	denied := []acrapi.Call{{Action: "GetAuthorizationToken", Code: "Forbidden.RAM"}}
	if _, err := JudgeDetachedPull(refused, denied, "private/hello:v2"); err != nil {
		t.Errorf("refused: %v", err)
	}
	if _, err := JudgeDetachedPull(append(refused, registry.Request{Path: path, Who: "role r"}), nil, "private/hello:v2"); err == nil {
		t.Error("served after the detach: passed")
	}
	if _, err := JudgeDetachedPull(nil, nil, "private/hello:v2"); err == nil {
		t.Error("never asked: passed")
	}
	if _, err := JudgeDetachedPull(refused, []acrapi.Call{{Action: "GetAuthorizationToken"}}, "private/hello:v2"); err == nil {
		t.Error("a login issued after the detach: passed")
	}
}

func TestJudgeCredentialEvent(t *testing.T) {
	ev := cluster.Event{Type: "Warning", Reason: "ACRNoRAMRole", Message: "image credentials for 100.64.0.2:5000 (…): the instance has no RAM role attached"}
	if _, err := JudgeCredentialEvent([]cluster.Event{{Reason: "OOMKilling"}, ev}, credstatus.NoRAMRole, "100.64.0.2:5000"); err != nil {
		t.Error(err)
	}
	other := ev
	other.Message = strings.ReplaceAll(other.Message, "5000", "6000")
	normal := ev
	normal.Type = "Normal"
	for name, evs := range map[string][]cluster.Event{"none": nil, "another registry": {other}, "Normal": {normal},
		"another cause": {{Type: "Warning", Reason: "ACRAccessDenied", Message: ev.Message}}} {
		if _, err := JudgeCredentialEvent(evs, credstatus.NoRAMRole, "100.64.0.2:5000"); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

// kubeletJournal renders the kubelet's credential failure with klog's
// own text format, as the kubelet writes it, and as journalctl shows it:
// each line of the entry its own journal line.
func kubeletJournal(image, cause string) string {
	var b bytes.Buffer
	l := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&b)))
	err := fmt.Errorf("exit status 1: drover-acr-credential-provider: credentials for 100.64.0.2:5000: %s (meta-data/ram/security-credentials/ is 404)\nattach a RAM role", cause)
	// plugin.go's klog.ErrorS(err, "Failed to provide credentials for image", "provider", ..., "image", image)
	l.Error(err, "Failed to provide credentials for image", "provider", "acr", "image", image)
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		out = append(out, "[  812.5] izbp1 kubelet[700]: "+line)
	}
	return strings.Join(out, "\n")
}

func TestJudgeKubeletCredentialLog(t *testing.T) {
	img := "100.64.0.2:5000/private/hello"
	entry := kubeletJournal(img, "the instance has no RAM role attached")
	if !strings.Contains(entry, "\n") {
		t.Fatalf("klog wrote the entry on one line; the test is meant for its multi-line form:\n%s", entry)
	}
	out := func(j string) string { b, _ := json.Marshal(map[string]string{"journal": j}); return string(b) }
	if _, err := JudgeKubeletCredentialLog(out("other\n"+entry), img); err != nil {
		t.Error(err)
	}
	for name, o := range map[string]string{
		"another image":          out(kubeletJournal("100.64.0.2:5000/private/other", "the instance has no RAM role attached")),
		"a longer name":          out(kubeletJournal(img+"2", "the instance has no RAM role attached")),
		"another cause":          out(kubeletJournal(img, "access denied")),
		"cause on another entry": out(kubeletJournal("100.64.0.2:5000/private/other", "the instance has no RAM role attached") + "\n" + kubeletJournal(img, "access denied")),
		"no such line":           out("nothing"),
		"not the probe's":        "journal: x",
	} {
		if _, err := JudgeKubeletCredentialLog(o, img); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgeCredentialStatus(t *testing.T) {
	secrets := []secretscan.Secret{{Name: "ACR password", Value: []byte("acr-0011223344556677")}}
	status := func(class, reg, msg string) string {
		var b strings.Builder
		credstatus.Encode(&b, credstatus.Status{Time: time.Now(), Registry: reg, Class: class, Message: msg})
		o, _ := json.Marshal(map[string]any{"exists": true, "content": b.String()})
		return string(o)
	}
	if _, err := JudgeCredentialStatus(status(credstatus.NoRAMRole, "h:1", "no role"), credstatus.NoRAMRole, "h:1", secrets); err != nil {
		t.Error(err)
	}
	for name, o := range map[string]string{
		"a password in it": status(credstatus.NoRAMRole, "h:1", "login acr-0011223344556677 refused"),
		"success":          status("", "h:1", ""),
		"another registry": status(credstatus.NoRAMRole, "h:2", "no role"),
		"missing":          `{"exists":false}`,
		"not JSON":         "x",
	} {
		if _, err := JudgeCredentialStatus(o, credstatus.NoRAMRole, "h:1", secrets); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
	if _, err := JudgeCredentialStatus(status(credstatus.NoRAMRole, "h:1", "x"), credstatus.NoRAMRole, "h:1", nil); err == nil {
		t.Error("nothing to look for: passed")
	}
}

// TestPrivatePodSpec: no imagePullSecrets, pulled on every start.
func TestPrivatePodSpec(t *testing.T) {
	var pod struct {
		Spec struct {
			ImagePullSecrets []any `json:"imagePullSecrets"`
			Containers       []struct {
				Image, ImagePullPolicy string
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(privatePod("n", "p", "h:1/private/hello:v1"), &pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.ImagePullSecrets) != 0 || len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].ImagePullPolicy != "Always" ||
		pod.Spec.Containers[0].Image != "h:1/private/hello:v1" {
		t.Errorf("pod %+v", pod)
	}
}

// TestJudgeVarScanCredentials: a credential issued to the node fails the
// scan, named by what it is (never its value).
func TestJudgeVarScanCredentials(t *testing.T) {
	sc := &VarScan{Files: 40, Hits: []secretscan.Hit{{Path: "/var/lib/containerd/x", Where: "plain", Secret: "STS AccessKeySecret of STS.a"}}}
	err := JudgeVarScan(sc)
	if err == nil || err.Error() != "credentials issued to the node are in /var/lib/containerd/x (STS AccessKeySecret of STS.a, plain)" {
		t.Errorf("JudgeVarScan = %v", err)
	}
}

func TestJudgeRunScan(t *testing.T) {
	secrets := []secretscan.Secret{{Name: "the bootstrap token's secret", Value: []byte("0123456789abcdef")},
		{Name: "ACR password", Value: []byte("acr-0011223344556677")}}
	clean := map[string][]byte{"journal": []byte("MESSAGE=hello\n"), credstatus.Path: []byte(`{"class":"NoRAMRole"}`), "/run/drover/status.json": []byte("{}")}
	if d, err := JudgeRunScan(clean, secrets); err != nil || !strings.Contains(d, "journal 14 bytes") {
		t.Errorf("clean: %q, %v", d, err)
	}
	with := func(name, body string) map[string][]byte {
		m := maps.Clone(clean)
		m[name] = []byte(body)
		return m
	}
	for name, tc := range map[string]struct {
		got     map[string][]byte
		secrets []secretscan.Secret
	}{
		"a password in the journal": {with("journal", "MESSAGE=login acr-0011223344556677"), secrets},
		"the token in status.json":  {with("/run/drover/status.json", "0123456789abcdef"), secrets},
		"no journal":                {with("journal", ""), secrets},
		"no provider status":        {with(credstatus.Path, ""), secrets},
		"no credential to look for": {clean, secrets[:1]},
	} {
		if _, err := JudgeRunScan(tc.got, tc.secrets); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}
