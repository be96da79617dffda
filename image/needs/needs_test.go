package needs

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/tree"
)

// fakeELF is the smallest ELF64 executable debug/elf reads an interpreter
// and DT_NEEDED entries from: a PT_INTERP program header over .interp, and
// sections null, .interp, .dynstr, .dynamic, .shstrtab.
func fakeELF(interp string, needed ...string) []byte {
	le := binary.LittleEndian
	dynstr := []byte{0}
	var dyn []byte
	for _, n := range needed {
		e := make([]byte, 16)
		le.PutUint64(e, uint64(elf.DT_NEEDED))
		le.PutUint64(e[8:], uint64(len(dynstr)))
		dyn = append(dyn, e...)
		dynstr = append(append(dynstr, n...), 0)
	}
	dyn = append(dyn, make([]byte, 16)...) // DT_NULL
	shstr := []byte("\x00.interp\x00.dynstr\x00.dynamic\x00.shstrtab\x00")
	interpB := append([]byte(interp), 0)
	const ehsize, phsize, shsize = 64, 56, 64
	off := uint64(ehsize + phsize)
	type sec struct {
		name, link uint32
		typ        elf.SectionType
		data       []byte
		off        uint64
	}
	secs := []sec{{}, {name: 1, typ: elf.SHT_PROGBITS, data: interpB}, {name: 9, typ: elf.SHT_STRTAB, data: dynstr},
		{name: 17, typ: elf.SHT_DYNAMIC, data: dyn, link: 2}, {name: 26, typ: elf.SHT_STRTAB, data: shstr}}
	var body []byte
	for i := 1; i < len(secs); i++ {
		secs[i].off = off + uint64(len(body))
		body = append(body, secs[i].data...)
	}
	shoff := off + uint64(len(body))
	var b bytes.Buffer
	h := make([]byte, ehsize)
	copy(h, "\x7fELF\x02\x01\x01")
	le.PutUint16(h[16:], uint16(elf.ET_EXEC))
	le.PutUint16(h[18:], uint16(elf.EM_X86_64))
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[32:], ehsize) // phoff
	le.PutUint64(h[40:], shoff)
	le.PutUint16(h[52:], ehsize)
	le.PutUint16(h[54:], phsize)
	le.PutUint16(h[56:], 1)
	le.PutUint16(h[58:], shsize)
	le.PutUint16(h[60:], uint16(len(secs)))
	le.PutUint16(h[62:], uint16(len(secs)-1))
	b.Write(h)
	ph := make([]byte, phsize)
	le.PutUint32(ph, uint32(elf.PT_INTERP))
	le.PutUint64(ph[8:], secs[1].off)
	le.PutUint64(ph[32:], uint64(len(interpB)))
	le.PutUint64(ph[40:], uint64(len(interpB)))
	b.Write(ph)
	b.Write(body)
	for _, s := range secs {
		e := make([]byte, shsize)
		le.PutUint32(e, s.name)
		le.PutUint32(e[4:], uint32(s.typ))
		le.PutUint64(e[24:], s.off)
		le.PutUint64(e[32:], uint64(len(s.data)))
		le.PutUint32(e[40:], s.link)
		if s.typ == elf.SHT_DYNAMIC {
			le.PutUint64(e[56:], 16)
		}
		b.Write(e)
	}
	return b.Bytes()
}

func add(t *testing.T, tr *tree.Tree, n *tree.Node) {
	t.Helper()
	if n.Mode == 0 {
		n.Mode = 0o755
	}
	if n.Owner == "" {
		n.Owner = "pkg"
	}
	if err := tr.Set(n); err != nil {
		t.Fatal(err)
	}
}

func reg(p string, data []byte) *tree.Node {
	return &tree.Node{Path: p, Kind: tree.Regular, Data: data}
}

func TestCheck(t *testing.T) {
	tr := tree.New()
	add(t, tr, reg("/usr/lib64/ld-linux-x86-64.so.2", []byte("ld")))
	add(t, tr, reg("/usr/lib/x86_64-linux-gnu/libc.so.6", []byte("c")))
	add(t, tr, &tree.Node{Path: "/usr/lib/x86_64-linux-gnu/libz.so.1", Kind: tree.Symlink, Mode: 0o777, Target: "libz.so.1.3"})
	add(t, tr, reg("/usr/lib/x86_64-linux-gnu/libz.so.1.3", []byte("z")))
	add(t, tr, reg("/usr/bin/sh", []byte("sh")))
	add(t, tr, reg("/usr/bin/env", []byte("env")))
	// Met: the loader, libc, libz through a symlink (and /lib64 through
	// the merged-/usr alias), sh.
	add(t, tr, &tree.Node{Path: "/usr/bin/ok", Kind: tree.Regular, Data: fakeELF("/lib64/ld-linux-x86-64.so.2", "libc.so.6", "libz.so.1"), Owner: "good"})
	add(t, tr, reg("/usr/bin/ok.sh", []byte("#!/bin/sh\necho\n")))
	// Needs of left-out paths.
	add(t, tr, &tree.Node{Path: "/usr/bin/bad", Kind: tree.Regular, Data: fakeELF("/lib/klibc.so", "libc.so.6", "libgone.so.2"), Owner: "bad"})
	add(t, tr, reg("/usr/share/x/hook", []byte("#!/usr/bin/env -S perl -w\n")))
	add(t, tr, &tree.Node{Path: "/usr/share/x/data", Kind: tree.Regular, Mode: 0o644, Data: []byte("#!/usr/bin/perl\n")}) // not executable: no need
	add(t, tr, reg("/usr/lib/systemd/system/a.service", []byte("[Service]\nExecStartPre=-/usr/sbin/gone-pre\nExecStart=@gone a\nPAMName=login\n")))
	add(t, tr, &tree.Node{Path: "/etc/systemd/system/multi-user.target.wants/a.service", Kind: tree.Symlink, Mode: 0o777, Target: "/usr/lib/systemd/system/a.service"})
	add(t, tr, reg("/usr/lib/systemd/system/off.service", []byte("[Service]\nExecStart=/usr/sbin/gone-pre\n"))) // not wanted
	add(t, tr, reg("/etc/pam.d/su", []byte("auth [success=1 default=ignore] pam_gone.so\nauth required pam_gone.so\n-session optional pam_opt.so\n")))
	leftOut := map[string]string{
		"/usr/lib/klibc.so":                              "exclude[0] libklibc",
		"/usr/lib/x86_64-linux-gnu/libgone.so.2":         "exclude[1] libgone",
		"/usr/bin/perl":                                  "exclude[2] perl-base",
		"/usr/sbin/gone-pre":                             "remove[0] /usr/sbin/gone-*",
		"/usr/bin/gone":                                  "remove[1] /usr/bin/gone",
		"/etc/pam.d/login":                               "exclude[3] login",
		"/usr/lib/x86_64-linux-gnu/security/pam_gone.so": "exclude[4] libpam-modules",
		"/usr/lib/x86_64-linux-gnu/security/pam_opt.so":  "exclude[4] libpam-modules",
	}
	var got []string
	for _, p := range Check(tr, leftOut) {
		got = append(got, p.File+" "+p.Needs+" <- "+p.By)
	}
	want := []string{
		"/etc/pam.d/su pam_gone.so (PAM module) <- exclude[4] libpam-modules",
		"/usr/bin/bad /lib/klibc.so (PT_INTERP) <- exclude[0] libklibc",
		"/usr/bin/bad libgone.so.2 (DT_NEEDED) <- exclude[1] libgone",
		"/usr/lib/systemd/system/a.service /usr/sbin/gone-pre (ExecStartPre=) <- remove[0] /usr/sbin/gone-*",
		"/usr/lib/systemd/system/a.service gone (ExecStart=) <- remove[1] /usr/bin/gone",
		"/usr/lib/systemd/system/a.service login (PAMName=) <- exclude[3] login",
		"/usr/share/x/hook perl (#!/usr/bin/env perl) <- exclude[2] perl-base",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckMasked(t *testing.T) {
	tr := tree.New()
	add(t, tr, reg("/usr/lib/systemd/system/a.service", []byte("[Service]\nExecStart=/usr/bin/gone\n")))
	add(t, tr, &tree.Node{Path: "/usr/lib/systemd/system/multi-user.target.wants/a.service", Kind: tree.Symlink, Mode: 0o777, Target: "../a.service"})
	add(t, tr, &tree.Node{Path: "/etc/systemd/system/a.service", Kind: tree.Symlink, Mode: 0o777, Target: "/dev/null"})
	if p := Check(tr, map[string]string{"/usr/bin/gone": "remove[0]"}); len(p) != 0 {
		t.Errorf("a masked unit's needs count: %v", p)
	}
}
