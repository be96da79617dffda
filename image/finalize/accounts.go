package finalize

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-os/drover/image/tree"
)

// accounts writes /etc/passwd, group, shadow and gshadow: Debian's static
// base accounts plus every system user and group that the packages declare
// in sysusers.d, with IDs allocated at build time (deterministically, the
// way systemd-sysusers would) so that files on the persistent /var keep
// their owners across boots. root is locked: a drover node has no password
// login.
type accounts struct{}

func (accounts) String() string { return "accounts" }
func (accounts) Why() string {
	return "base-passwd and the packages' postinst scripts would create users; sysusers.d declares them, IDs fixed at build time, root locked"
}

type user struct {
	name, gecos, home, shell string
	uid, gid                 int
}

// baseUsers and baseGroups are Debian's fixed IDs (base-passwd's
// passwd.master / group.master) that packages may rely on numerically.
var baseUsers = []user{
	{"root", "root", "/root", "/bin/sh", 0, 0},
	{"daemon", "daemon", "/usr/sbin", "/usr/sbin/nologin", 1, 1},
	{"bin", "bin", "/bin", "/usr/sbin/nologin", 2, 2},
	{"sys", "sys", "/dev", "/usr/sbin/nologin", 3, 3},
	{"nobody", "nobody", "/nonexistent", "/usr/sbin/nologin", 65534, 65534},
}

var baseGroups = map[string]int{
	"root": 0, "daemon": 1, "bin": 2, "sys": 3, "adm": 4, "tty": 5, "disk": 6, "lp": 7, "mail": 8, "news": 9,
	"uucp": 10, "man": 12, "proxy": 13, "kmem": 15, "dialout": 20, "fax": 21, "voice": 22, "cdrom": 24,
	"floppy": 25, "tape": 26, "sudo": 27, "audio": 29, "dip": 30, "www-data": 33, "backup": 34,
	"operator": 37, "list": 38, "irc": 39, "src": 40, "shadow": 42, "utmp": 43, "video": 44, "sasl": 45,
	"plugdev": 46, "staff": 50, "games": 60, "users": 100, "nogroup": 65534,
}

func (accounts) Run(t *tree.Tree, env *Env) error {
	users := map[string]user{}
	groups := map[string]int{}
	members := map[string][]string{}
	for _, u := range baseUsers {
		users[u.name] = u
	}
	for g, id := range baseGroups {
		groups[g] = id
	}
	var pendingUsers []user
	var pendingGroups []string
	for _, p := range t.Glob("/usr/lib/sysusers.d/*.conf") {
		if err := parseSysusers(p, t.Get(p).Data, users, groups, members, &pendingUsers, &pendingGroups); err != nil {
			return err
		}
	}
	// Dynamic IDs: highest free below 1000, in sorted name order, as
	// systemd-sysusers allocates system IDs downward from SYS_UID_MAX.
	used := map[int]bool{}
	for _, id := range groups {
		used[id] = true
	}
	for _, u := range users {
		used[u.uid] = true
	}
	next := func() (int, error) {
		for id := 999; id > 100; id-- {
			if !used[id] {
				used[id] = true
				return id, nil
			}
		}
		return 0, fmt.Errorf("no free system ID left")
	}
	sort.Strings(pendingGroups)
	for _, g := range pendingGroups {
		if _, ok := groups[g]; ok {
			continue
		}
		id, err := next()
		if err != nil {
			return err
		}
		groups[g] = id
	}
	sort.Slice(pendingUsers, func(i, j int) bool { return pendingUsers[i].name < pendingUsers[j].name })
	for _, u := range pendingUsers {
		if _, ok := users[u.name]; ok {
			continue
		}
		if gid, ok := groups[u.name]; ok && u.uid < 0 && !usedByUser(users, gid) {
			u.uid = gid // same ID for a user and its own group, as sysusers prefers
		} else if u.uid < 0 {
			id, err := next()
			if err != nil {
				return err
			}
			u.uid = id
		}
		if gid, ok := groups[u.name]; ok {
			u.gid = gid
		} else {
			groups[u.name] = u.uid
			u.gid = u.uid
		}
		used[u.uid] = true
		users[u.name] = u
	}
	return writeAccounts(t, users, groups, members)
}

func usedByUser(users map[string]user, id int) bool {
	for _, u := range users {
		if u.uid == id {
			return true
		}
	}
	return false
}

// parseSysusers reads the lines drover needs from a sysusers.d file:
// u (user, optional fixed ID), g (group), m (membership).
func parseSysusers(path string, data []byte, users map[string]user, groups map[string]int, members map[string][]string, pu *[]user, pg *[]string) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		f := fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "g":
			if id, err := strconv.Atoi(at(f, 2)); err == nil {
				if _, ok := groups[f[1]]; !ok {
					groups[f[1]] = id
				}
			} else {
				*pg = append(*pg, f[1])
			}
		case "u", "u!":
			u := user{name: f[1], uid: -1, gecos: at(f, 3), home: at(f, 4), shell: at(f, 5)}
			idf := at(f, 2)
			if uid, gid, ok := strings.Cut(idf, ":"); ok {
				idf = uid
				if g, err := strconv.Atoi(gid); err == nil {
					groups[u.name] = g
				}
			}
			if id, err := strconv.Atoi(idf); err == nil {
				u.uid = id
			}
			if u.home == "" || u.home == "-" {
				u.home = "/"
			}
			if u.shell == "" || u.shell == "-" {
				u.shell = "/usr/sbin/nologin"
			}
			if u.gecos == "-" {
				u.gecos = ""
			}
			*pu = append(*pu, u)
		case "m":
			members[at(f, 2)] = append(members[at(f, 2)], f[1])
		case "r":
		default:
			return fmt.Errorf("%s:%d: unsupported sysusers line type %q", path, n, f[0])
		}
	}
	return nil
}

func at(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// fields splits a sysusers line, honouring double quotes.
func fields(s string) []string {
	var out []string
	var cur strings.Builder
	inQ, have := false, false
	for _, r := range strings.TrimSpace(s) {
		switch {
		case r == '"':
			inQ, have = !inQ, true
		case (r == ' ' || r == '\t') && !inQ:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

func writeAccounts(t *tree.Tree, users map[string]user, groups map[string]int, members map[string][]string) error {
	ul := make([]user, 0, len(users))
	for _, u := range users {
		ul = append(ul, u)
	}
	sort.Slice(ul, func(i, j int) bool {
		return ul[i].uid < ul[j].uid || (ul[i].uid == ul[j].uid && ul[i].name < ul[j].name)
	})
	var passwd, shadow strings.Builder
	for _, u := range ul {
		fmt.Fprintf(&passwd, "%s:x:%d:%d:%s:%s:%s\n", u.name, u.uid, u.gid, u.gecos, u.home, u.shell)
		// '*' can never match a password: no password login, root included.
		fmt.Fprintf(&shadow, "%s:*:1::::::\n", u.name)
	}
	type grp struct {
		name string
		id   int
	}
	gl := make([]grp, 0, len(groups))
	for n, id := range groups {
		gl = append(gl, grp{n, id})
	}
	sort.Slice(gl, func(i, j int) bool { return gl[i].id < gl[j].id || (gl[i].id == gl[j].id && gl[i].name < gl[j].name) })
	var group, gshadow strings.Builder
	for _, g := range gl {
		m := append([]string(nil), members[g.name]...)
		sort.Strings(m)
		fmt.Fprintf(&group, "%s:x:%d:%s\n", g.name, g.id, strings.Join(m, ","))
		fmt.Fprintf(&gshadow, "%s:*::%s\n", g.name, strings.Join(m, ","))
	}
	shadowGID := uint32(groups["shadow"])
	for _, n := range []*tree.Node{
		file("/etc/passwd", 0o644, passwd.String()),
		file("/etc/group", 0o644, group.String()),
		{Path: "/etc/shadow", Kind: tree.Regular, Mode: 0o640, GID: shadowGID, Data: []byte(shadow.String()), Owner: "drover"},
		{Path: "/etc/gshadow", Kind: tree.Regular, Mode: 0o640, GID: shadowGID, Data: []byte(gshadow.String()), Owner: "drover"},
	} {
		if err := t.Set(n); err != nil {
			return err
		}
	}
	return nil
}
