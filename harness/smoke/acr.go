package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-os/drover/agent/credstatus"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/harness/acrapi"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/registry"
	"github.com/drover-os/drover/internal/secretscan"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Private ACR images (issue 38): the harness registry is also the custom
// domain of an emulated ACR Enterprise instance whose repositories under
// private/ need a login the emulated ACR API (harness/acrapi) issued for
// the instance's RAM role; the node file lists the instance and the API
// endpoint (registries.acr), and the kubelet gets the login from
// drover-acr-credential-provider, with no imagePullSecret.
const (
	// SmokeRAMRole is the RAM role attached to the smoke's instance.
	SmokeRAMRole = "drover-smoke-node"
	// PrivatePrefix is the private repositories' prefix.
	PrivatePrefix = "private/"
	// PrivateImage is the hello image, pushed privately; PrivateImage2
	// is the same under another tag, pulled after the role is detached.
	PrivateImage  = PrivatePrefix + "hello:v1"
	PrivateImage2 = PrivatePrefix + "hello:v2"
	// acrLoginLifetime is the life of an issued login: under the
	// provider's five-minute cache margin, so the kubelet caches none
	// and asks the provider again for every pull (a pull after the role
	// is detached must not use a login cached from before).
	acrLoginLifetime = 4 * time.Minute
)

// SmokeACRInstance is the emulated Enterprise instance.
func SmokeACRInstance() acrapi.Instance {
	return acrapi.Instance{ID: "cri-drover0smoke", Name: "drover-smoke", Region: ECSInstance().RegionID}
}

// startACR serves the ACR API on the host (the guest reaches it at
// 100.64.0.2), makes the registry's private/ repositories need its logins
// and pushes the hello image there under both private tags.
func (e *Env) startACR(ctx context.Context) error {
	e.ACR = acrapi.New(e.Metadata, nil)
	e.ACR.LoginLifetime = acrLoginLifetime
	e.ACR.AddInstance(SmokeACRInstance())
	var err error
	if e.acrLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return fmt.Errorf("ACR API emulator: %w", err)
	}
	e.acrSrv = &http.Server{Handler: e.ACR}
	go e.acrSrv.Serve(e.acrLn)
	e.Registry.RequireToken(PrivatePrefix, func(user, pass string) (string, bool) {
		l, ok := e.ACR.Check(user, pass)
		return ACRWho(l), ok
	})
	src, err := name.ParseReference(e.Registry.Addr()+"/"+registry.HelloImage, name.Insecure)
	if err != nil {
		return err
	}
	idx, err := remote.Index(src, remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reading %s to push it privately: %w", src, err)
	}
	for _, ref := range []string{PrivateImage, PrivateImage2} {
		repo, tag, _ := strings.Cut(ref, ":")
		if err := registry.PushIndex(ctx, e.Registry, repo, tag, idx); err != nil {
			return err
		}
	}
	e.logf("ACR API emulator on %s (guest: %s), instance %s; %s and %s need its logins", e.acrLn.Addr(), e.guestACR(), SmokeACRInstance().ID, PrivateImage, PrivateImage2)
	return nil
}

// ACRWho is how the registry's log names a login the ACR API issued: the
// role, the instance and the STS key it was issued with (never the login).
func ACRWho(l acrapi.Login) string {
	return fmt.Sprintf("role %s (ACR instance %s, login issued with STS key %s)", l.Role, l.InstanceID, l.AccessKeyID)
}

func (e *Env) guestACR() string {
	return fmt.Sprintf("http://%s:%d", HostFromVM, e.acrLn.Addr().(*net.TCPAddr).Port)
}

// acrSpec is the node file's registries.acr; nil without the emulator.
func (e *Env) acrSpec() *userdata.ACR {
	if e.ACR == nil {
		return nil
	}
	in := SmokeACRInstance()
	return &userdata.ACR{Instances: []userdata.ACRInstance{{Domain: e.GuestRegistry(), ID: in.ID, Region: in.Region}},
		APIEndpoint: e.guestACR()}
}

// checkPrivateACR pulls the private image with the instance's RAM role,
// then detaches the role and pulls another tag, which must fail, with the
// cause in the kubelet's log and as a Node Event. The role is attached
// again at the end.
func (e *Env) checkPrivateACR(ctx context.Context, r *Report, in *Instance) {
	if e.ACR == nil {
		return
	}
	s := time.Now()
	name := "private ACR image runs with no imagePullSecret (login from the instance's RAM role)"
	p, err := e.waitPod(ctx, in, "acr-private", privatePod(in.NodeName, "acr-private", e.GuestRegistry()+"/"+PrivateImage), 5*time.Minute,
		func(p *cluster.Pod) (bool, error) {
			// Backing off: the pull failed and was retried; no need to
			// wait out the limit.
			if len(p.Waiting) == 1 && p.Waiting[0].Reason == "ImagePullBackOff" {
				return true, fmt.Errorf("pod %s: %s: %s", p.Name, p.Waiting[0].Reason, p.Waiting[0].Message)
			}
			done, _, err := JudgePod(p, in.NodeName)
			return done, err
		})
	detail := ""
	if err == nil {
		detail, err = JudgePrivatePod(p, e.Images[registry.HelloImage])
	}
	if !r.add(name, s, err, detail) {
		return
	}
	s = time.Now()
	detail, err = JudgeACRPull(e.Registry.Requests(), e.ACR.Logins(), e.Metadata.IssuedCredentials(), SmokeRAMRole, SmokeACRInstance().ID, PrivateImage)
	r.add("registry log: the private pull was authorized with a login ACR issued for the instance's RAM role", s, err, detail)

	// Detached: the kubelet caches no login (acrLoginLifetime), so the
	// next pull asks the provider, which finds no role.
	s = time.Now()
	e.Metadata.DetachRAMRole()
	defer func() {
		inst := e.Metadata.Instance()
		inst.RAMRole = SmokeRAMRole
		e.Metadata.SetInstance(inst)
	}()
	callsBefore := len(e.ACR.Calls())
	name = "RAM role detached: a pod with another private tag stays in ErrImagePull/ImagePullBackOff"
	body := privatePod(in.NodeName, "acr-detached", e.GuestRegistry()+"/"+PrivateImage2)
	p, err = e.waitPod(ctx, in, "acr-detached", body, healthWindow, func(p *cluster.Pod) (bool, error) {
		return JudgePullFailed(p) == nil, nil
	})
	if err == nil {
		// Still failing a while later: the kubelet retried in between.
		time.Sleep(20 * time.Second)
		if p, err = e.Cluster.Pod(ctx, "default", "acr-detached"); err == nil {
			err = JudgePullFailed(p)
		}
	}
	detail = ""
	if err == nil {
		detail, err = JudgeDetachedPull(e.Registry.Requests(), e.ACR.Calls()[callsBefore:], PrivateImage2)
		if p != nil && len(p.Waiting) > 0 {
			detail = p.Waiting[0].Reason + ": " + p.Waiting[0].Message + "; " + detail
		}
	}
	r.add(name, s, err, detail)

	s = time.Now()
	detail, err = e.waitFinding(ctx, in, nil, "", func(_ *cluster.Pod, _ *cluster.Node, evs []cluster.Event) (string, error) {
		return JudgeCredentialEvent(evs, credstatus.NoRAMRole, e.GuestRegistry())
	})
	r.add("Node Event names the cause (ACRNoRAMRole, from the provider's status via the agent)", s, err, detail)

	s = time.Now()
	msg, err := e.probe(ctx, in, "acr-status", []string{"read", credstatus.Path})
	if err == nil {
		detail, err = JudgeCredentialStatus(msg, credstatus.NoRAMRole, e.GuestRegistry(), e.credentialSecrets())
	}
	r.add("credential provider's status file ("+credstatus.Path+") holds the failure's class and no credential", s, err, detail)

	s = time.Now()
	msg, err = e.probe(ctx, in, "acr-journal", []string{"journal", "kubelet.service", "2000", "Failed to provide credentials for image"})
	if err == nil {
		// The kubelet asks for the repository's credentials, without the tag.
		repo, _, _ := strings.Cut(PrivateImage2, ":")
		detail, err = JudgeKubeletCredentialLog(msg, e.GuestRegistry()+"/"+repo)
	}
	r.add("kubelet's journal has the provider's error naming the cause", s, err, detail)

	s = time.Now()
	detail, err = e.scanRun(ctx, in)
	r.add("no STS or ACR credential issued to the node, nor the bootstrap token's secret, in its journal or /run/drover (this boot, read from the running node)", s, err, detail)
}

// scanRun has a probe POST the node's journal of this boot (volatile: in
// /run, gone at shutdown, so the scan of /var cannot see it) and the
// files in /run/drover to a listener on the host, and looks for every
// secret in them. Nothing the node sends is written on it.
func (e *Env) scanRun(ctx context.Context, in *Instance) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	var mu sync.Mutex
	got := map[string][]byte{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "want a POST", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got[r.URL.Query().Get("name")] = b
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := fmt.Sprintf("http://%s:%d/", HostFromVM, ln.Addr().(*net.TCPAddr).Port)
	msg, err := e.probe(ctx, in, "scan-run", []string{"post-journal", url})
	if err != nil {
		return msg, err
	}
	secrets := append([]secretscan.Secret{{Name: "the bootstrap token's secret", Value: []byte(nodeconfig.TokenSecret(e.Cluster.BootstrapToken()))}},
		e.credentialSecrets()...)
	mu.Lock()
	defer mu.Unlock()
	return JudgeRunScan(got, secrets)
}

// JudgeRunScan judges what the node sent of its journal and /run/drover:
// the journal and the credential provider's status must be there, and no
// secret in any of it.
func JudgeRunScan(got map[string][]byte, secrets []secretscan.Secret) (string, error) {
	var probs, sizes []string
	for _, want := range []string{"journal", credstatus.Path} {
		if len(got[want]) == 0 {
			probs = append(probs, "the node sent no "+want)
		}
	}
	creds := 0
	for _, sec := range secrets {
		if len(sec.Value) > 0 && sec.Name != "the bootstrap token's secret" {
			creds++
		}
	}
	if creds == 0 {
		probs = append(probs, "no STS or ACR credential was issued: nothing to look for")
	}
	var hits []string
	for _, name := range slices.Sorted(maps.Keys(got)) {
		sizes = append(sizes, fmt.Sprintf("%s %d bytes", name, len(got[name])))
		for _, h := range secretscan.FindAll(name, got[name], secrets) {
			hits = append(hits, h.String())
		}
	}
	if len(hits) > 0 {
		probs = append(probs, "secrets are in "+strings.Join(hits, "; "))
	}
	return fmt.Sprintf("%d credentials and the bootstrap token's secret looked for in %s", creds, strings.Join(sizes, ", ")), errIf(probs)
}

// privatePod is a pod of image with no imagePullSecrets, pulled on every
// start (imagePullPolicy Always).
func privatePod(node, podName, image string) []byte {
	spec := podSpec(node, image, nil, false)
	spec["containers"].([]any)[0].(map[string]any)["imagePullPolicy"] = "Always"
	body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": podName, "namespace": "default"}, "spec": spec})
	return body
}

// waitPod creates the pod from body and reads it until done says so or
// limit passes.
func (e *Env) waitPod(ctx context.Context, in *Instance, podName string, body []byte, limit time.Duration, done func(*cluster.Pod) (bool, error)) (*cluster.Pod, error) {
	if err := e.Cluster.CreatePod(ctx, "default", body); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var p *cluster.Pod
	for {
		q, err := e.Cluster.Pod(ctx, "default", podName)
		if err == nil && q != nil {
			p = q
			if ok, err := done(p); ok || err != nil {
				return p, err
			}
		}
		select {
		case <-ctx.Done():
			state := "not found"
			if p != nil {
				state = p.Phase + " " + p.Reason + " " + p.Message
				for _, w := range p.Waiting {
					state += "; waiting: " + w.Reason + " " + w.Message
				}
			}
			return p, fmt.Errorf("pod %s: %s: %w", podName, state, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// JudgePrivatePod checks the private image's pod from the API server: it
// ran to completion, with no imagePullSecrets, from the image's digest.
func JudgePrivatePod(p *cluster.Pod, digest string) (string, error) {
	if p == nil {
		return "", fmt.Errorf("no pod")
	}
	var probs []string
	if p.Phase != "Succeeded" || len(p.ExitCodes) != 1 || p.ExitCodes[0] != 0 {
		probs = append(probs, fmt.Sprintf("phase %s, exit codes %v; want Succeeded, 0", p.Phase, p.ExitCodes))
	}
	if len(p.PullSecrets) > 0 {
		probs = append(probs, fmt.Sprintf("the pod has imagePullSecrets %v", p.PullSecrets))
	}
	if digest == "" || len(p.ImageIDs) != 1 || !strings.HasSuffix(p.ImageIDs[0], "@"+digest) {
		probs = append(probs, fmt.Sprintf("imageID %v, want the hello image's %s", p.ImageIDs, digest))
	}
	return fmt.Sprintf("phase %s, no imagePullSecrets, imageID %s", p.Phase, strings.Join(p.ImageIDs, " ")), errIf(probs)
}

// JudgeACRPull finds, in the registry's requests, the private image's
// manifest served for a login the ACR API issued to role for instanceID
// with STS credentials the metadata service issued for role.
func JudgeACRPull(reqs []registry.Request, logins []acrapi.Login, issued []ecsmeta.STSCredentials, role, instanceID, image string) (string, error) {
	ours := map[string]bool{}
	for _, c := range issued {
		if c.Role == role {
			ours[c.AccessKeyID] = true
		}
	}
	valid := map[string]bool{}
	for _, l := range logins {
		if l.Role == role && l.InstanceID == instanceID && ours[l.AccessKeyID] {
			valid[ACRWho(l)] = true
		}
	}
	repo, tag, _ := strings.Cut(image, ":")
	path := "/v2/" + repo + "/manifests/" + tag
	var refused int
	for _, q := range reqs {
		if q.Path != path {
			continue
		}
		if q.Who == "" {
			refused++
			continue
		}
		if valid[q.Who] {
			return fmt.Sprintf("%s %s for %s (%d logins issued, %d anonymous requests refused first)", q.Method, q.Path, q.Who, len(logins), refused), nil
		}
		return "", fmt.Errorf("%s %s was served for %q, not a login ACR issued to role %s", q.Method, q.Path, q.Who, role)
	}
	return "", fmt.Errorf("no request for %s was authorized (%d refused; %d logins issued, %d for role %s and instance %s)",
		path, refused, len(logins), len(valid), role, instanceID)
}

// JudgePullFailed passes while the pod's container waits on a failed pull.
func JudgePullFailed(p *cluster.Pod) error {
	if p == nil {
		return fmt.Errorf("no pod")
	}
	if p.Phase != "Pending" || len(p.Waiting) != 1 || (p.Waiting[0].Reason != "ErrImagePull" && p.Waiting[0].Reason != "ImagePullBackOff") {
		return fmt.Errorf("pod %s: phase %s, waiting %+v; want Pending in ErrImagePull or ImagePullBackOff", p.Name, p.Phase, p.Waiting)
	}
	return nil
}

// JudgeDetachedPull checks the registry and the ACR API after the role was
// detached: the image's manifest was asked for and refused, never served,
// and ACR was asked for no login (the provider had no role to sign with).
func JudgeDetachedPull(reqs []registry.Request, callsSince []acrapi.Call, image string) (string, error) {
	repo, tag, _ := strings.Cut(image, ":")
	path := "/v2/" + repo + "/manifests/" + tag
	refused := 0
	for _, q := range reqs {
		if q.Path != path {
			continue
		}
		if q.Who != "" {
			return "", fmt.Errorf("%s %s was served for %s after the role was detached", q.Method, q.Path, q.Who)
		}
		refused++
	}
	if refused == 0 {
		return "", fmt.Errorf("the registry was never asked for %s: the failure is not the registry's refusal", path)
	}
	for _, c := range callsSince {
		if c.Action == "GetAuthorizationToken" && c.Code == "" {
			return "", fmt.Errorf("ACR issued a login after the role was detached (%+v)", c)
		}
	}
	return fmt.Sprintf("registry: %s refused %d times, never served; ACR: %d calls since, no login issued", path, refused, len(callsSince)), nil
}

// JudgeCredentialEvent finds the agent's Warning Event for class on the
// Node, naming the registry.
func JudgeCredentialEvent(evs []cluster.Event, class, registryHost string) (string, error) {
	want := credstatus.Reason(class)
	for _, ev := range evs {
		if ev.Reason == want && ev.Type == "Warning" && strings.Contains(ev.Message, registryHost) {
			return ev.Reason + ": " + ev.Message, nil
		}
	}
	var seen []string
	for _, ev := range evs {
		seen = append(seen, ev.Reason)
	}
	return "", fmt.Errorf("no Warning Event %s naming %s on the Node (Events: %s)", want, registryHost, strings.Join(seen, ", "))
}

// JudgeKubeletCredentialLog finds the kubelet's line for the provider's
// failure on repo (the image without its tag, as the kubelet looks
// credentials up), with the provider's cause, in the probe's journal
// output.
func JudgeKubeletCredentialLog(probeOut, repo string) (string, error) {
	var res struct {
		Journal string `json:"journal"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal([]byte(probeOut), &res); err != nil {
		return "", fmt.Errorf("the probe's journal output: %w: %s", err, probeOut)
	}
	// One entry is the kubelet's line and the klog continuation lines
	// the probe kept after it: the provider's error is a multi-line
	// value, and image="..." comes after it.
	var entries []string
	for _, l := range strings.Split(res.Journal, "\n") {
		if strings.Contains(l, "Failed to provide credentials for image") || len(entries) == 0 {
			entries = append(entries, l)
		} else {
			entries[len(entries)-1] += "\n" + l
		}
	}
	for _, e := range entries {
		if strings.Contains(e, "Failed to provide credentials for image") && strings.Contains(e, `image="`+repo+`"`) &&
			strings.Contains(e, "the instance has no RAM role attached") {
			return strings.ReplaceAll(strings.TrimSpace(e), "\n", " | "), nil
		}
	}
	return "", fmt.Errorf("no kubelet entry for image=%q with the provider's \"the instance has no RAM role attached\" in its journal (lines with the kubelet's message: %q) %s", repo, res.Journal, res.Error)
}

// JudgeCredentialStatus checks the provider's status file as the probe
// read it: the failure's class for the registry, and none of the
// credentials issued to the node in it.
func JudgeCredentialStatus(probeOut, class, registryHost string, secrets []secretscan.Secret) (string, error) {
	var res struct {
		Exists  bool   `json:"exists"`
		Content string `json:"content"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal([]byte(probeOut), &res); err != nil {
		return "", fmt.Errorf("the probe's output: %w: %s", err, probeOut)
	}
	if !res.Exists {
		return "", fmt.Errorf("%s does not exist on the node %s", credstatus.Path, res.Error)
	}
	detail := strings.TrimSpace(res.Content)
	if hits := secretscan.FindAll(credstatus.Path, []byte(res.Content), secrets); len(hits) > 0 || len(secrets) == 0 {
		names := make([]string, len(hits))
		for i, h := range hits {
			names[i] = h.String()
		}
		return "", fmt.Errorf("credentials issued to the node are in %s (or none to look for): %s", credstatus.Path, strings.Join(names, "; "))
	}
	st, err := credstatus.Parse([]byte(res.Content))
	if err != nil {
		return detail, err
	}
	if st.Class != class || st.Registry != registryHost {
		return detail, fmt.Errorf("status class %q for %s, want %q for %s", st.Class, st.Registry, class, registryHost)
	}
	return fmt.Sprintf("%s; scanned for %d credentials", detail, len(secrets)), nil
}
