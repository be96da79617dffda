package conformance

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/drover-os/drover/harness/registry"
)

// Target is what the suite runs against: a control plane with a joined
// drover node and the harness registry the node pulls from. The smoke
// environment (harness/smoke, Options.Conformance) provides all three, so
// a run can share the smoke's boot.
type Target struct {
	Kubeconfig    string             // cluster-admin kubeconfig on the host
	Registry      *registry.Registry // where the test images are pushed
	GuestRegistry string             // the registry as the node reaches it, host:port
}

// Options of one run.
type Options struct {
	// Specs are the suite's specs as ListSpecs read them into WorkDir,
	// which installed e2e.test there: the caller lists them first to
	// resolve its focus, and Run classifies the report against them.
	Specs   []string
	Ginkgo  string // the ginkgo CLI (BuildGinkgo's cache blob), for Plan.Procs > 1
	WorkDir string // the repo list, the report dir, the suite's log
	Plan    Plan
	Log     io.Writer // progress; the suite's own output goes to WorkDir/e2e.log
}

// Run pushes images, runs the suite and judges it. The suite failing
// specs is a Result, not an error; an error means there is no result.
func Run(ctx context.Context, t Target, images []Image, o Options) (*Result, error) {
	if err := o.Plan.Validate(); err != nil {
		return nil, err
	}
	if len(o.Specs) == 0 {
		return nil, fmt.Errorf("conformance: no specs to run against: list them with ListSpecs into %s first", o.WorkDir)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	for _, im := range images {
		if err := registry.PushIndex(ctx, t.Registry, im.Repo, im.Tag, im.Index); err != nil {
			return nil, fmt.Errorf("pushing test image %s:%s: %w", im.Repo, im.Tag, err)
		}
		d, _ := im.Index.Digest()
		fmt.Fprintf(o.Log, "conformance: test image %s/%s:%s %s (from %s)\n", t.GuestRegistry, im.Repo, im.Tag, d, im.From)
	}
	repoList := filepath.Join(o.WorkDir, "repo-list.yaml")
	if err := os.WriteFile(repoList, RepoList(t.GuestRegistry), 0o644); err != nil {
		return nil, err
	}
	bin := filepath.Join(o.WorkDir, "e2e.test")
	reportDir := filepath.Join(o.WorkDir, "report")
	os.RemoveAll(reportDir)
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(o.WorkDir, "e2e.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, bin, o.Plan.Args(t.Kubeconfig, reportDir)...)
	if o.Plan.Procs > 1 {
		if o.Ginkgo == "" {
			return nil, fmt.Errorf("running the suite in %d processes needs the ginkgo CLI (cluster.BuildGinkgo)", o.Plan.Procs)
		}
		gk := filepath.Join(o.WorkDir, "ginkgo")
		if err := installExecutable(o.Ginkgo, gk); err != nil {
			return nil, err
		}
		cmd = exec.CommandContext(ctx, gk, o.Plan.GinkgoArgs(bin, t.Kubeconfig, reportDir)...)
	}
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	cmd.Stdout, cmd.Stderr = logf, logf
	fmt.Fprintf(o.Log, "conformance: running %s (log: %s)\n", strings.Join(cmd.Args, " "), logPath)
	runErr := cmd.Run()
	junit, err := os.Open(filepath.Join(reportDir, "junit_01.xml"))
	if err != nil {
		return nil, fmt.Errorf("the suite wrote no JUnit report (%v; exit: %v); see %s", err, runErr, logPath)
	}
	defer junit.Close()
	res, err := Classify(o.Specs, junit, o.Plan)
	if err != nil {
		return nil, err
	}
	res.SuiteErr = runErr
	return res, nil
}

// ListSpecs installs e2e (a cache blob) as workDir/e2e.test and returns
// the full names of its specs (e2e.test --list-tests).
func ListSpecs(ctx context.Context, e2e, workDir string) ([]string, error) {
	bin := filepath.Join(workDir, "e2e.test")
	if err := installExecutable(e2e, bin); err != nil {
		return nil, err
	}
	list, err := exec.CommandContext(ctx, bin, "--list-tests").Output()
	if err != nil {
		return nil, fmt.Errorf("e2e.test --list-tests: %w", err)
	}
	all := ParseList(string(list))
	if len(all) == 0 {
		return nil, fmt.Errorf("e2e.test --list-tests listed no specs")
	}
	return all, nil
}

// JUnitPath is where Run leaves the suite's JUnit report in workDir.
func JUnitPath(workDir string) string { return filepath.Join(workDir, "report", "junit_01.xml") }

// Unbuilt lists, from the registry's own record, the image manifests the
// node asked for that were not built here, each with the status the
// registry answered ("e2e-test-images/nginx:1.27.0-2 404"), sorted and
// without repeats. It is an error if one was answered with anything but
// 404: the harness registry holds only what Run pushed, and every
// registry the suite knows is mapped to it, so nothing else is served.
//
// An image is built by repository and tag: another tag of a built
// repository (agnhost's previous version, AgnhostPrev) is not built. A
// manifest asked for by digest in a built repository is one of the
// pushed images' (the node resolves the tag, then fetches by digest).
// own are the harness's own images ("drover/hello:v1"), pushed and read
// by the harness beside the test images; only pulls (GET, HEAD) count.
func Unbuilt(reqs []registry.Request, images []Image, own ...string) ([]string, error) {
	built := map[string]bool{}
	repos := map[string]bool{}
	for _, im := range images {
		built[im.Repo+":"+im.Tag] = true
		repos[im.Repo] = true
	}
	for _, ref := range own {
		built[ref] = true
		repos[strings.SplitN(ref, ":", 2)[0]] = true
	}
	seen := map[string]bool{}
	var out, served []string
	for _, r := range reqs {
		repo, ref, ok := strings.Cut(strings.TrimPrefix(r.Path, "/v2/"), "/manifests/")
		if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) ||
			built[repo+":"+ref] || (repos[repo] && strings.HasPrefix(ref, "sha256:")) {
			continue
		}
		k := fmt.Sprintf("%s:%s %d", repo, ref, r.Status)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, k)
		if r.Status != http.StatusNotFound {
			served = append(served, k)
		}
	}
	sort.Strings(out)
	if len(served) > 0 {
		return out, fmt.Errorf("the registry answered manifests of images not built here with other than 404: %s", strings.Join(served, ", "))
	}
	return out, nil
}

// installExecutable copies a cache blob (read-only, no execute bit) to dst
// as an executable.
func installExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("installing %s: %w", filepath.Base(dst), err)
	}
	defer in.Close()
	os.Remove(dst)
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("installing %s: %w", filepath.Base(dst), err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("installing %s: %w", filepath.Base(dst), err)
	}
	return out.Close()
}
