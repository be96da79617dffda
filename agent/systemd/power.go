package systemd

import (
	"context"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// PowerOff asks logind (org.freedesktop.login1.Manager.PowerOff, on the
// system bus) to power the machine off. Through logind, not systemd's
// poweroff.target: logind honours the delay inhibitors, the kubelet's
// graceful node shutdown among them, and signals PrepareForShutdown, on
// which the kubelet stops its pods first. logind lets a caller holding
// CAP_SYS_BOOT do it without polkit (the image has none). go-systemd's
// login1.PowerOff drops the call's error; this returns it.
func PowerOff(ctx context.Context) error {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("connecting to the system bus for logind: %w", err)
	}
	defer conn.Close()
	call := conn.Object("org.freedesktop.login1", "/org/freedesktop/login1").
		CallWithContext(ctx, "org.freedesktop.login1.Manager.PowerOff", 0, false)
	if call.Err != nil {
		return fmt.Errorf("logind PowerOff: %w", call.Err)
	}
	return nil
}
