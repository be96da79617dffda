package boot

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Paths are the places drover-init works in; Default is the initrd's.
type Paths struct {
	Config  string // the builder's config file
	Modules string // /lib/modules
	Proc    string // where proc is mounted
	Sys     string // where sysfs is mounted
	Dev     string // where devtmpfs is mounted
	Run     string // where /run's tmpfs is mounted
	Sysroot string // where the real root is assembled
}

// DefaultPaths are the paths of a running initrd.
var DefaultPaths = Paths{
	Config:  ConfigPath,
	Modules: "/lib/modules",
	Proc:    "/proc",
	Sys:     "/sys",
	Dev:     "/dev",
	Run:     "/run",
	Sysroot: "/sysroot",
}

func (p Paths) cmdline() string  { return filepath.Join(p.Proc, "cmdline") }
func (p Paths) sysBlock() string { return filepath.Join(p.Sys, "class", "block") }

// Timeouts of the bounded waits.
const (
	PartitionWait = 30 * time.Second
	pollInterval  = 50 * time.Millisecond
	// RebootDelay is how long a fatal error stays on screen before the
	// reboot, long enough for a person watching the console to read it.
	RebootDelay = 10 * time.Second
)

// Machine is the state the steps share: what earlier steps found and made.
type Machine struct {
	Paths   Paths
	Log     *Log
	Config  *Config
	Cmdline Cmdline

	parts   BootPartitions
	rootDev string // the dm-verity node, /dev/dm-N
	// mountEFIVars mounts efivarfs (tests replace it); nil is the real one.
	mountEFIVars func(dir string) (unmount func(), err error)
	varDev       string // the var partition's node
	// secureBootState is what the secure-boot step found: SecureBootOn,
	// SecureBootOff or SecureBootUnknown ("" before it ran).
	secureBootState string
}

// NewMachine returns the state of a fresh boot.
func NewMachine(p Paths, log *Log) *Machine { return &Machine{Paths: p, Log: log} }

// Step is one stage of the boot: a name (for the console and drover.break),
// a description of what it does, and the function that does it.
type Step struct {
	Name     string
	describe func(c *Config) string
	run      func(m *Machine) error
}

// String names the step and says what it does in general terms.
func (s Step) String() string { return s.Name + ": " + s.describe(nil) }

// Describe says what the step does with config c (c may be nil).
func (s Step) Describe(c *Config) string { return s.Name + ": " + s.describe(c) }

// Run performs the step.
func (s Step) Run(m *Machine) error { return s.run(m) }

// Steps returns the boot, in order. drover.break can name any step after
// "config", the one that reads the command line.
func Steps() []Step {
	return []Step{
		{"mount-api", describeMountAPI, (*Machine).mountAPI},
		{"config", describeConfig, (*Machine).readConfig},
		{"modules", describeModules, (*Machine).loadModules},
		{"secure-boot", describeSecureBoot, (*Machine).secureBoot},
		{"signed-cmdline", describeSignedCmdline, (*Machine).signedCmdline},
		{"partitions", describePartitions, (*Machine).waitPartitions},
		{"verity", describeVerity, (*Machine).setupVerity},
		{"mount-root", describeMountRoot, (*Machine).mountRoot},
		{"read-ahead", describeReadAhead, (*Machine).readAhead},
		{"var-partition", describeVarPartition, (*Machine).ensureVarPartition},
		{"var-format", describeVarFormat, (*Machine).formatVar},
		{"var-mount", describeVarMount, (*Machine).mountVar},
		{"var-stamp", describeVarStamp, (*Machine).varStamp},
		{"etc-overlay", describeEtcOverlay, (*Machine).etcOverlay},
		{"machine-id", describeMachineID, (*Machine).machineID},
		{"move-mounts", describeMoveMounts, (*Machine).moveMounts},
		{"switch-root", describeSwitchRoot, (*Machine).switchRoot},
	}
}

// StepNames lists the names of steps, in order.
func StepNames(steps []Step) []string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Name
	}
	return names
}

// BreakError is returned by Run when drover.break stops the boot.
type BreakError struct{ Step string }

func (e *BreakError) Error() string {
	return fmt.Sprintf("stopped before step %s as drover.break=%s asks", e.Step, e.Step)
}

// Run performs the steps in order, printing one line as each starts. It
// returns the first error, wrapped with the step's name, or a *BreakError;
// a successful switch-root does not return.
func Run(m *Machine, steps []Step) error {
	for _, s := range steps {
		if m.Config != nil && m.Cmdline.Break == s.Name {
			return &BreakError{Step: s.Name}
		}
		m.Log.Step(s.Name)
		if err := s.Run(m); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	return nil
}

// Halt prints why the boot stopped, waits delay so the line can be read,
// and reboots. It never returns: PID 1 must not exit, so when the reboot
// itself fails it sleeps forever.
func Halt(log *Log, err error, delay time.Duration) {
	var brk *BreakError
	if errors.As(err, &brk) {
		log.Printf("break before %s (drover.break); rebooting in %ds", brk.Step, int(delay.Seconds()))
	} else {
		log.Fatal(err.Error(), delay)
	}
	time.Sleep(delay)
	unix.Sync()
	rerr := unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	log.Printf("reboot failed: %v; halting", rerr)
	for {
		time.Sleep(time.Hour)
	}
}

// readConfig reads the builder's config and the kernel command line and
// checks that they describe the same image.
func (m *Machine) readConfig() error {
	b, err := readFile(m.Paths.Config)
	if err != nil {
		return fmt.Errorf("reading %s: %w (the initrd is incomplete: rebuild the image)", m.Paths.Config, err)
	}
	c, err := Parse(b)
	if err != nil {
		return err
	}
	cl, err := readFile(m.Paths.cmdline())
	if err != nil {
		return fmt.Errorf("reading %s: %w", m.Paths.cmdline(), err)
	}
	cmd := ParseCmdline(string(cl))
	if err := CheckCmdline(cmd, c, StepNames(Steps())); err != nil {
		return err
	}
	m.Config, m.Cmdline = c, cmd
	m.Log.SetDebug(cmd.Debug)
	m.Log.Debugf("config: kernel %s, %d modules, root hash %s", c.Kernel, len(c.Modules), c.RootHash)
	return nil
}

// CheckCmdline checks the drover.* parameters against the config: the
// root hash must be the initrd's (a loader entry and an initrd from
// different builds must not boot), and drover.break must name a step.
func CheckCmdline(cmd Cmdline, c *Config, steps []string) error {
	if !cmd.HasRootHash {
		return fmt.Errorf("the kernel command line has no drover.roothash=: the loader entry is not a drover one; rebuild the image")
	}
	if !strings.EqualFold(cmd.RootHash, c.RootHash) {
		return fmt.Errorf("drover.roothash=%s on the kernel command line but the initrd was built for %s: the loader entry and initrd come from different builds; rebuild the image",
			cmd.RootHash, c.RootHash)
	}
	if cmd.Break != "" {
		// Only steps after "config" can be stopped before: the command
		// line is read there.
		after := steps
		for i, s := range steps {
			if s == "config" {
				after = steps[i+1:]
			}
		}
		for _, s := range after {
			if s == cmd.Break {
				return nil
			}
		}
		return fmt.Errorf("drover.break=%s names no step drover-init can stop before; use one of %s",
			cmd.Break, strings.Join(after, ", "))
	}
	return nil
}
