// Package keys is drover's trust root for the Debian archive: for each suite,
// the OpenPGP keys that may sign its InRelease, committed in this directory
// and compiled into drover so that a lock or fetch trusts the same keys on
// every machine, whatever the build host's keyring says.
//
// debian-archive-<suite>.asc holds the suite's archive automatic signing key
// and its stable release key, exported from Debian's debian-archive-keyring
// package:
//
//	K=/usr/share/keyrings
//	gpg --no-default-keyring --keyring $K/debian-archive-trixie-automatic.gpg \
//	    --keyring $K/debian-archive-trixie-stable.gpg --export --armor > debian-archive-trixie.asc
//
// The security archive signs its suites (trixie-security) with keys of its
// own; debian-archive-<release>-security.asc holds the release's security
// archive automatic signing key:
//
//	gpg --no-default-keyring --keyring $K/debian-archive-trixie-security-automatic.gpg \
//	    --export --armor > debian-archive-trixie-security.asc
//
// trixie-updates (and trixie-backports, trixie-proposed-updates) live in the
// main archive and are signed by trixie's keys.
//
// The archive also signs each suite with the previous release's automatic key
// (trixie carries a bookworm signature); that key is deliberately left out, so
// a trixie lock is explained by trixie's own keys. A new key is added by
// committing the new export: the diff is the review.
package keys

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
)

//go:embed debian-archive-*.asc
var files embed.FS

// Dir is this directory relative to the repository root, for messages and
// for the lock's record of where the trust root came from.
const Dir = "recipes/keys"

// Debian returns the armored keys that may sign suite's InRelease and the
// file they came from (relative to the repository root).
func Debian(suite string) (data []byte, name string, err error) {
	name = "debian-archive-" + TrustName(suite) + ".asc"
	data, err = files.ReadFile(name)
	if err != nil {
		have, _ := fs.Glob(files, "debian-archive-*.asc")
		return nil, "", fmt.Errorf("no trust root for Debian suite %q in %s (have %v): export the suite's archive keys into %s/%s and rebuild drover, or pass --keyring", suite, Dir, have, Dir, name)
	}
	return data, Dir + "/" + name, nil
}

// mainArchiveSuffixes are the suites of a release that the main archive
// carries and signs with the release's own keys.
var mainArchiveSuffixes = []string{"-updates", "-proposed-updates", "-backports"}

// TrustName is the name of the key set that signs suite: the release's
// (trixie for trixie-updates), or the release's security archive's
// (trixie-security).
func TrustName(suite string) string {
	for _, s := range mainArchiveSuffixes {
		if base, ok := strings.CutSuffix(suite, s); ok {
			return base
		}
	}
	return suite
}
