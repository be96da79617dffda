package boot

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Under Secure Boot the UKI's signature covers its .cmdline, but
// systemd-stub does not pass that command line alone: after it, the stub
// appends each signed add-on's .cmdline and then the SMBIOS Type 11 string
// io.systemd.stub.kernel-cmdline-extra=, which whoever runs the hypervisor
// sets (systemd 257 skips it only in confidential VMs). The kernel and
// systemd as PID 1 read every word of it (drover.*, systemd.*, init=…).
// The builder therefore also writes the command line it signed into the
// initrd's config (covered by the same signature), and drover-init compares.

// CmdlineDiff is how the kernel's command line differs from the signed
// one, word by word. The zero value means they are the same.
type CmdlineDiff struct {
	Extra     []string // words the kernel got beyond the signed ones, in the kernel's order
	Missing   []string // signed words the kernel did not get
	Reordered bool     // the same words, in another order
	Appended  bool     // the signed words come first, unchanged: the extras were added after them, as systemd-stub adds
}

// Same reports whether the kernel got exactly the signed words.
func (d CmdlineDiff) Same() bool { return len(d.Extra) == 0 && len(d.Missing) == 0 && !d.Reordered }

// String names the difference, e.g. `extra "drover.smbiostest=1"
// (appended after the signed command line: …)`.
func (d CmdlineDiff) String() string {
	if d.Same() {
		return "the same words as the signed command line"
	}
	var parts []string
	if len(d.Extra) > 0 {
		parts = append(parts, "extra "+quoteWords(d.Extra))
	}
	if len(d.Missing) > 0 {
		parts = append(parts, "missing "+quoteWords(d.Missing))
	}
	if d.Reordered {
		parts = append(parts, "the signed words in another order")
	}
	s := strings.Join(parts, ", ")
	switch {
	case d.Appended:
		s += " (appended after the signed command line: by systemd-stub from SMBIOS io.systemd.stub.kernel-cmdline-extra or an add-on's .cmdline)"
	default:
		s += " (not only appended after the signed words: the command line was changed before the kernel got it)"
	}
	return s
}

func quoteWords(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, " ")
}

// CompareCmdline compares the contents of /proc/cmdline with the command
// line the UKI was signed with. Both are split into words as the kernel
// splits them: whitespace outside double quotes separates words, so runs
// of whitespace, the newline the kernel ends /proc/cmdline with and the
// control characters systemd-stub turns into spaces do not count; quotes
// stay part of a word, so `a="b c"` and `a=b c` differ. Anything else
// does: an extra word, a missing one, a changed one, another order (a
// later parameter overrides an earlier one, so order is meaning).
func CompareCmdline(signed, proc string) CmdlineDiff {
	want, got := cmdlineWords(signed), cmdlineWords(proc)
	if slices.Equal(want, got) {
		return CmdlineDiff{}
	}
	var d CmdlineDiff
	left := map[string]int{}
	for _, w := range want {
		left[w]++
	}
	for _, w := range got {
		if left[w] > 0 {
			left[w]--
			continue
		}
		d.Extra = append(d.Extra, w)
	}
	for _, w := range want {
		if left[w] > 0 {
			left[w]--
			d.Missing = append(d.Missing, w)
		}
	}
	d.Reordered = len(d.Extra) == 0 && len(d.Missing) == 0
	d.Appended = len(got) > len(want) && slices.Equal(want, got[:len(want)])
	if d.Appended {
		// Name the words after the signed ones, even one that repeats a
		// signed word (a second drover.roothash= overrides the first).
		d.Extra = append([]string(nil), got[len(want):]...)
	}
	return d
}

// cmdlineWords splits like splitCmdline but keeps the quotes, so the
// comparison sees the bytes the kernel and systemd parse.
func cmdlineWords(s string) []string {
	var words []string
	var cur strings.Builder
	inQuote := false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			cur.WriteRune(r)
		case r <= ' ' || r == 0x7f:
			if inQuote {
				// systemd-stub turns every control character into a
				// space, inside quotes too.
				cur.WriteByte(' ')
			} else if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words
}

func describeSignedCmdline(c *Config) string {
	signed := "the config's cmdline"
	if c != nil {
		signed = strconv.Quote(c.Cmdline)
	}
	rule := ": if the config says the UKI is signed, any difference stops the boot whatever Secure Boot reads as; " +
		"else under Secure Boot any difference stops it, without it a warning names the difference"
	if c != nil && c.SignedUKI {
		rule = ": the UKI is signed, so any difference stops the boot, whether Secure Boot reads as on, off or unknown"
	} else if c != nil {
		rule = ": the UKI is unsigned, so under Secure Boot any difference stops the boot, without it (or unreadable) a warning names the difference"
	}
	return "compare /proc/cmdline word by word with the UKI's signed .cmdline, " + signed + rule
}

// JudgeCmdline decides what a kernel command line that differs from the
// signed one (d) does to the boot: an error stops it; a warning lets it
// go on. signedUKI is the initrd config's word that its UKI is signed;
// state is the secure-boot step's finding.
//
// A signed UKI takes only its own command line, whatever the Secure Boot
// state reads as: whoever appends words (SMBIOS, an add-on) can append
// noefi or efi=noruntime too, which hides the state, and the words would
// then hold. An unsigned UKI keeps the developer's way: extra words are
// refused under Secure Boot only (where it cannot boot anyway).
func JudgeCmdline(signedUKI bool, state string, d CmdlineDiff) (warning string, err error) {
	if d.Same() {
		return "", nil
	}
	read := map[string]string{SecureBootOn: "on", SecureBootOff: "off"}[state]
	if read == "" {
		read = "unknown: it could not be read"
	}
	switch {
	case signedUKI:
		return "", fmt.Errorf("refusing to boot: the kernel command line is not the signed one: %s; "+
			"the UKI is signed, so only its signed command line is honoured, whatever Secure Boot reads as (here: %s)", d, read)
	case state == SecureBootOn:
		return "", fmt.Errorf("refusing to boot: the kernel command line is not the signed one: %s; under Secure Boot only the signed command line is honoured", d)
	}
	return fmt.Sprintf("WARNING: the kernel command line is not the signed one: %s; booting anyway because the UKI is unsigned and Secure Boot is %s", d, read), nil
}

// signedCmdline compares /proc/cmdline with the signed command line and
// acts on JudgeCmdline's verdict.
func (m *Machine) signedCmdline() error {
	b, err := readFile(m.Paths.cmdline())
	if err != nil {
		return fmt.Errorf("reading %s: %w", m.Paths.cmdline(), err)
	}
	d := CompareCmdline(m.Config.Cmdline, string(b))
	if d.Same() {
		m.Log.Debugf("the kernel command line is the signed one")
		return nil
	}
	warning, err := JudgeCmdline(m.Config.SignedUKI, m.secureBootState, d)
	if err != nil {
		return err
	}
	m.Log.Printf("%s", warning)
	return nil
}
