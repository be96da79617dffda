package build

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/drover-os/drover/image/authenticode"
	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/uki"
)

// bootFiles assembles the UKI (stub + os-release, command line, kernel
// release, initrd, kernel), signs it and systemd-boot when the build has a
// Secure Boot key, and returns the ESP's files.
func (b *builder) bootFiles(cmdline string, initrd []byte) ([]esp.File, error) {
	osrel := b.tree.Get("/usr/lib/os-release")
	if osrel == nil {
		return nil, fmt.Errorf("/usr/lib/os-release not in the tree: the UKI's .osrel needs it (base-files provides it)")
	}
	image, err := uki.Build(b.stub, uki.Parts{OSRelease: osrel.Data, Cmdline: cmdline, Uname: b.man.Kernel, Initrd: initrd, Linux: b.kernel,
		SBAT: []uki.SBATEntry{SBATEntry(b.p.Recipe, b.epoch.Format("20060102.150405"))}})
	if err != nil {
		return nil, fmt.Errorf("UKI from %s: %w", b.arch.Stub(), err)
	}
	loader := b.systemdBoot
	var keys map[string][]byte
	if s := b.o.SecureBoot; s != nil {
		if image, err = s.Sign(image); err != nil {
			return nil, fmt.Errorf("signing the UKI: %w", err)
		}
		if loader, err = s.Sign(loader); err != nil {
			return nil, fmt.Errorf("signing systemd-boot (%s): %w", b.arch.SystemdBoot(), err)
		}
		b.logf("build: signed %s and %s with %s", esp.UKIPath, b.arch.RemovableMediaPath(), certName(s))
		if b.o.SecureBootEnroll {
			if keys, err = s.EnrollmentFiles(b.epoch); err != nil {
				return nil, fmt.Errorf("secure boot keys for enrolment: %w", err)
			}
			b.logf("build: %s/{PK,KEK,db}.auth for systemd-boot to enrol", esp.KeysDir)
		}
	} else if b.o.SecureBootEnroll {
		return nil, fmt.Errorf("enrolling Secure Boot keys needs the signing key: give --secure-boot-key and --secure-boot-cert")
	}
	return esp.LoaderFiles(b.arch.RemovableMediaPath(), image, loader, keys), nil
}

// SBATComponent is the component name of the SBAT entry every drover UKI
// carries: an SbatLevel line "drover,N" refuses every drover UKI whose
// generation is below N, whichever recipe built it.
const SBATComponent = "drover"

// SBATEntry is the UKI's own SBAT line: component drover at the recipe's
// generation, the recipe's name as the package and the image version
// (the lock's epoch) as its version.
func SBATEntry(r *recipe.Recipe, version string) uki.SBATEntry {
	return uki.SBATEntry{Component: SBATComponent, Generation: r.SecureBoot.SBATGeneration, Vendor: "drover",
		Package: r.Name, Version: version, URL: "https://github.com/drover-os/drover"}
}

// certName names a signing certificate in the manifest and the log:
// subject and SHA-256 fingerprint.
func certName(s *authenticode.Signer) string {
	fp := sha256.Sum256(s.Cert.Raw)
	return s.Cert.Subject.String() + " (sha256 " + hex.EncodeToString(fp[:]) + ")"
}

func espManifest(files []esp.File, signer *authenticode.Signer) ([]ESPFile, error) {
	out := make([]ESPFile, 0, len(files))
	for _, f := range files {
		e := ESPFile{Path: f.Path, Size: len(f.Data), SHA256: sha(f.Data)}
		if strings.HasSuffix(strings.ToUpper(f.Path), ".EFI") {
			secs, err := uki.Sections(f.Data)
			if err != nil {
				return nil, fmt.Errorf("ESP file %s: %w", f.Path, err)
			}
			if f.Path == esp.UKIPath {
				e.Sections = secs
			}
			if signed, _ := authenticode.Signed(f.Data); signed && signer != nil {
				e.SignedBy = certName(signer)
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
