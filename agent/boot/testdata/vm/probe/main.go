// probe stands in for systemd in a VM test of drover-init: it reports what
// it finds on the console and powers off.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	con, err := os.OpenFile("/dev/console", os.O_WRONLY, 0)
	if err != nil {
		con = os.Stdout
	}
	p := func(f string, a ...any) { fmt.Fprintf(con, "PROBE: "+f+"\n", a...) }
	p("pid=%d argv=%q", os.Getpid(), os.Args)
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) > 9 {
			i := 6
			for f[i] != "-" {
				i++
			}
			p("mount %s %s %s %s", f[4], f[i+1], f[i+2], f[5])
		}
	}
	id, err := os.ReadFile("/etc/machine-id")
	p("etc machine-id=%q err=%v", strings.TrimSpace(string(id)), err)
	sid, err := os.ReadFile("/var/lib/drover/machine-id")
	p("var machine-id=%q err=%v", strings.TrimSpace(string(sid)), err)
	err = os.WriteFile("/etc/probe-written", []byte("x"), 0o644)
	p("write /etc: err=%v", err)
	err = os.WriteFile("/usr/probe-written", []byte("x"), 0o644)
	p("write /usr (must fail): err=%v", err)
	n := 0
	if b, err := os.ReadFile("/var/boot-count"); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	n++
	err = os.WriteFile("/var/boot-count", []byte(strconv.Itoa(n)), 0o644)
	p("boot-count=%d err=%v", n, err)
	big, err := os.ReadFile("/payload.bin")
	p("payload %d bytes err=%v", len(big), err)
	ents, _ := os.ReadDir("/")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	p("root entries %v", names)
	unix.Sync()
	p("DONE")
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}
