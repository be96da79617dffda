// Package updatestamp is systemd's "/etc and /var are up to date with /usr"
// stamp, the .updated file systemd-update-done writes. ConditionNeedsUpdate=
// (ldconfig, sysusers, hwdb, journal catalog, update-done) is true when the
// stamp is missing or older than /usr; a drover node never updates /usr in
// place, so the builder stamps /etc and drover-init stamps the var partition
// with /usr's own mtime, and nothing rebuilds itself at boot.
package updatestamp

import "fmt"

// Name is the stamp's file name in /etc and /var.
const Name = ".updated"

// Content is what systemd-update-done writes for a /usr whose mtime is
// nsec nanoseconds since the Unix epoch; systemd reads TIMESTAMP_NSEC when
// the file system keeps only whole seconds.
func Content(nsec int64) []byte {
	return []byte("# This file was created by systemd-update-done. The timestamp below is the\n" +
		"# modification time of /usr/ for which the most recent updates of /etc/ and\n" +
		"# /var/ have been applied. See man:systemd-update-done.service(8) for details.\n" +
		fmt.Sprintf("TIMESTAMP_NSEC=%d\n", nsec))
}
