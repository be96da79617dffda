package systemd

import (
	"github.com/coreos/go-systemd/v22/daemon"
)

// Notify sends sd_notify state lines ("READY=1", "STATUS=…"). Outside a
// systemd service (NOTIFY_SOCKET unset) it does nothing, so the agent runs
// the same under tests.
func Notify(state string) error {
	_, err := daemon.SdNotify(false, state)
	return err
}

// Status sets the unit's status line shown by `systemctl status`.
func Status(s string) error { return Notify("STATUS=" + s) }
