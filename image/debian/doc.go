// Package debian is drover's client for the Debian archive and its dependency
// resolver, used by `drover lock` to turn a recipe's package list into a pinned
// set of .deb files.
//
// The package separates pure code from I/O:
//
//   - MirrorFromAPT and ResolveMirror find the archive root from a flag, the
//     DROVER_MIRROR environment variable or the host's apt sources (read through
//     an fs.FS, so tests use fstest.MapFS);
//   - VerifyInRelease checks a clearsigned InRelease against the archive keyring
//     and parses the signed Release text; VerifyPinnedInRelease does the same
//     without judging its age, for an InRelease a lock pins by sha256;
//   - ParseIndex reads a Packages index with a hand-written scanner that keeps
//     only the fields the resolver and the lock need;
//   - Resolve computes the dependency closure of a set of root packages over an
//     Index, deterministically, and explains why each package is in it.
//
// Client is the thin layer that talks HTTP: it fetches InRelease first (always
// fresh, verified before anything else is trusted), then fetches Packages
// indexes through a content-addressed Store, pinned by the hashes the verified
// Release lists.
package debian
