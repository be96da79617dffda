package ignition

import (
	"path"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// nodeLinks are the symbolic links a booted node has in its writable
// trees before the config is applied, so that a path through them is
// judged where the kernel will take it:
//   - /var/run and /var/lock: systemd's own tmpfiles.d (var.conf,
//     legacy.conf) make them at every boot on the persistent /var
//     (image/finalize empties /var in the image);
//   - /etc/resolv.conf: image/finalize links it to resolved's stub;
//   - /etc/mtab: systemd's tmpfiles.d etc.conf.
var nodeLinks = map[string]string{
	"/var/run":         "../run",
	"/var/lock":        "../run/lock",
	"/etc/resolv.conf": "../run/systemd/resolve/stub-resolv.conf",
	"/etc/mtab":        "../proc/self/mounts",
}

// maxLinkHops bounds link following as the kernel does (ELOOP at 40).
const maxLinkHops = 40

// resolver follows symbolic links the way the kernel does: component by
// component, ".." after the link before it was followed, never lexically.
type resolver map[string]string // clean absolute link path -> raw target

// nodeResolver knows the node's links and the config's own symbolic
// links (which exist once it is applied, when tmpfiles runs).
func nodeResolver(links []types.Link) resolver {
	r := resolver{}
	for p, t := range nodeLinks {
		r[p] = t
	}
	for _, l := range links {
		if l.Target != nil && !util.IsTrue(l.Hard) && path.IsAbs(l.Path) {
			r[path.Clean(l.Path)] = *l.Target
		}
	}
	return r
}

// resolve returns the path p (absolute) reaches once every link on the
// way, the last component's included, is followed.
func (r resolver) resolve(p string) string { return r.walk(p, true) }

// resolveParent follows the links above p's last component only: where
// an operation that does not follow a final link (creating a link, a
// node) would act.
func (r resolver) resolveParent(p string) string { return r.walk(p, false) }

func (r resolver) walk(p string, followLast bool) string {
	rest := strings.Split(p, "/")
	done := "/"
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, c)
		t, isLink := r[next]
		if !isLink || hops >= maxLinkHops || (!followLast && !hasNext(rest)) {
			done = next
			continue
		}
		hops++
		if path.IsAbs(t) {
			done = "/"
		}
		rest = append(strings.Split(t, "/"), rest...)
	}
	return done
}

// hasNext reports whether a component other than "" or "." remains.
func hasNext(rest []string) bool {
	for _, c := range rest {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}
