package kmod

import (
	"reflect"
	"strings"
	"testing"
)

func TestModInfo(t *testing.T) {
	fm := fakeModule{
		modinfo: []string{
			"alias=fs-erofs",
			"name=erofs",
			"depends=libcrc32c,,mbcache",
			"softdep=pre: crc32c post: foo",
			"softdep=ignored pre: bar",
			"weakdep=zstd",
			"firmware=erofs/a.bin",
			"alias=devname:erofs",
			"intree",
		},
		exports:  []string{"erofs_a", "erofs_b"},
		needs:    []string{"crc32c", "printk", "kmalloc"},
		versions: []string{"crc32c", "module_layout", "printk", "printk"},
	}
	raw := fm.elf()
	want := &Info{
		Name:        "erofs",
		Depends:     []string{"libcrc32c", "mbcache"},
		Aliases:     []string{"fs-erofs", "devname:erofs"},
		SoftdepPre:  []string{"crc32c", "bar"},
		SoftdepPost: []string{"foo"},
		Weakdeps:    []string{"zstd"},
		Firmware:    []string{"erofs/a.bin"},
		Exports:     []string{"erofs_a", "erofs_b"},
		// Undefined symbols, then the __versions entries none of them
		// claimed (a second "printk" entry is left over, as in libkmod).
		Needs: []string{"crc32c", "printk", "kmalloc", "module_layout", "printk"},
	}
	for _, name := range []string{"erofs.ko", "erofs.ko.xz", "erofs.ko.zst", "erofs.ko.gz"} {
		t.Run(name, func(t *testing.T) {
			got, err := ModInfo(compress(t, name, raw))
			if err != nil {
				t.Fatal(err)
			}
			got.modinfo = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ModInfo =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestModInfoKsymtabFallback(t *testing.T) {
	// Without modversions there are no __crc_ symbols and libkmod reads the
	// exported names from __ksymtab_strings.
	got, err := ModInfo(fakeModule{modinfo: []string{"name=x"}, ksymtab: []string{"x_a", "x_b"}}.elf())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"x_a", "x_b"}; !reflect.DeepEqual(got.Exports, want) {
		t.Errorf("Exports = %q, want %q", got.Exports, want)
	}
	if got.Needs != nil {
		t.Errorf("Needs = %q, want none", got.Needs)
	}
}

func TestModInfoErrors(t *testing.T) {
	for name, data := range map[string][]byte{
		"not a module":  []byte("#!/bin/sh\n"),
		"truncated elf": fakeModule{}.elf()[:40],
		"bad xz":        []byte(magicXZ + "garbage"),
		"bad zstd":      []byte(magicZstd + "garbage"),
		"bad gzip":      []byte(magicGzip + "garbage"),
	} {
		if _, err := ModInfo(data); err == nil {
			t.Errorf("%s: ModInfo succeeded", name)
		} else if !strings.Contains(err.Error(), "module") {
			t.Errorf("%s: error %q does not say what it was reading", name, err)
		}
	}
}

func TestParseSoftdep(t *testing.T) {
	for _, tc := range []struct {
		in        string
		pre, post []string
	}{
		{"pre: a", []string{"a"}, nil},
		{"pre: a b post: c", []string{"a", "b"}, []string{"c"}},
		{"post: c pre: a", []string{"a"}, []string{"c"}},
		{"x pre:\ta  post:", []string{"a"}, nil},
		{"gcm", nil, nil},
	} {
		pre, post := parseSoftdep(tc.in)
		if !reflect.DeepEqual(pre, tc.pre) || !reflect.DeepEqual(post, tc.post) {
			t.Errorf("parseSoftdep(%q) = %q, %q; want %q, %q", tc.in, pre, post, tc.pre, tc.post)
		}
	}
}
