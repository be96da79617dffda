package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/gomod"
)

// Binaries are the control-plane programs Start runs.
type Binaries struct {
	APIServer         string
	ControllerManager string
}

// components returns the two control-plane programs of Kubernetes version
// as gomod components, stamped with the version like a release build (the
// recipes' kubelet, release: kubernetes, gets the same gomod.KubernetesLdflags),
// so that `kubectl version` and the version skew checks see a real version.
func components(version string, replaces []gomod.Replace) ([]gomod.Component, error) {
	ldflags, err := gomod.KubernetesLdflags(version)
	if err != nil {
		return nil, fmt.Errorf("control plane version: %w; use the recipe's kubelet version", err)
	}
	var out []gomod.Component
	for _, name := range []string{"kube-apiserver", "kube-controller-manager"} {
		out = append(out, gomod.Component{
			Name:    name,
			Module:  "k8s.io/kubernetes",
			Version: version,
			Package: "k8s.io/kubernetes/cmd/" + name,
			Replace: replaces,
			Ldflags: ldflags,
		})
	}
	return out, nil
}

// BuildBinaries returns kube-apiserver and kube-controller-manager of
// Kubernetes version for this host, built from the Go module proxy into the
// content-addressed cache at cacheDir the first time and served from it
// afterwards. Progress lines go to log; the go command's own output goes to
// buildLog (it is long: every module download).
func BuildBinaries(ctx context.Context, cacheDir, version string, log, buildLog io.Writer) (Binaries, error) {
	if log == nil {
		log = io.Discard
	}
	if runtime.GOOS != "linux" {
		return Binaries{}, fmt.Errorf("building the local control plane: it runs on Linux only, not %s", runtime.GOOS)
	}
	if _, err := components(version, nil); err != nil {
		return Binaries{}, err
	}
	store, err := cache.Open(cacheDir)
	if err != nil {
		return Binaries{}, fmt.Errorf("building the local control plane: %w", err)
	}
	env := gomod.Env{WorkDir: store.TempDir(), Log: buildLog}
	replaces, err := gomod.KubernetesReplaces(ctx, env, version)
	if err != nil {
		return Binaries{}, fmt.Errorf("building the local control plane %s: %w; check that the Go module proxy is reachable", version, err)
	}
	comps, err := components(version, replaces)
	if err != nil {
		return Binaries{}, err
	}
	var paths []string
	for _, c := range comps {
		p, err := buildOne(ctx, env, store, c, log)
		if err != nil {
			return Binaries{}, err
		}
		paths = append(paths, p)
	}
	return Binaries{APIServer: paths[0], ControllerManager: paths[1]}, nil
}

// buildOne locks and builds c under the cache lock of its key, so that two
// drover processes starting a cluster at once build it once, not twice.
func buildOne(ctx context.Context, env gomod.Env, store *cache.Cache, c gomod.Component, log io.Writer) (string, error) {
	locked, err := gomod.Lock(ctx, env, c)
	if err != nil {
		return "", fmt.Errorf("building %s %s: %w", c.Name, c.Version, err)
	}
	key := gomod.CacheKey(locked, runtime.GOOS, runtime.GOARCH, locked.GoVersion)
	unlock, err := store.LockContext(ctx, key)
	if err != nil {
		return "", fmt.Errorf("building %s %s: %w", c.Name, c.Version, err)
	}
	defer unlock()
	if _, ok, err := store.Lookup(key); err == nil && !ok {
		fmt.Fprintf(log, "building %s %s from the Go module proxy (first time: several minutes)\n", c.Name, c.Version)
	}
	start := time.Now()
	b, cached, err := gomod.BuildCached(ctx, env, store, locked, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return "", fmt.Errorf("building %s %s: %w", c.Name, c.Version, err)
	}
	if !cached {
		fmt.Fprintf(log, "built %s %s in %s (%d MiB), cached in %s\n", c.Name, c.Version,
			time.Since(start).Round(time.Second), b.Size>>20, store.Dir())
	}
	return b.Path, nil
}

// install copies the cached blob at src to dst with the execute bit: cache
// blobs are read-only and named by their hash, and the copy gives the
// process a name that ps, pgrep and the logs show.
func install(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("installing %s: %w", filepath.Base(dst), err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("installing %s: %w", filepath.Base(dst), err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Rename, not overwrite: a binary still running from an earlier
		// start would make the write fail with ETXTBSY.
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("installing %s from %s: %w", filepath.Base(dst), src, err)
	}
	return nil
}
