package smoke

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/internal/secretscan"
)

// storedConfig is the agent's stored user-data relative to /var: the scan
// must have found it, or an empty dump would pass.
const storedConfig = "lib/drover/config.ign"

// VarScan is what ScanVar found.
type VarScan struct {
	Files int              // regular files read
	Hits  []secretscan.Hit // files holding the secret, as /var/... paths
	// Raw are offsets in the partition where the secret's plain or base64
	// form lies outside any file's data ScanVar read (free blocks).
	Raw []int64
	// RawOwners says, for the first few of Raw, which inode owns the
	// block (debugfs icheck): "<block not found>" is a free block.
	RawOwners []string
	// Journal says whether the dump held a persistent journal, which was
	// read back with the host's journalctl (every field, decompressed)
	// and scanned as well; JournalBytes is the export's size.
	Journal      bool
	JournalBytes int
}

// ScanVar dumps a stopped instance's var partition (debugfs rdump: no
// mounts) and looks for secret in every file: plain, or inside the data:
// URLs, base64 runs and gzip streams it holds (internal/secretscan). It
// also reads the whole partition for the secret's plain and base64 forms,
// which finds copies in blocks no file owns any more.
//
// stored says the agent stored its config: the dump must hold it, or an
// empty dump would pass. Without it (a config refused before it was
// stored), the dump must hold at least one file.
func ScanVar(ctx context.Context, c *qemu.Config, secrets []secretscan.Secret, stored bool) (*VarScan, error) {
	dir, err := os.MkdirTemp(c.StateDir, "scan-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	varImg, err := varImage(ctx, c, dir)
	if err != nil {
		return nil, err
	}
	img, err := os.Open(varImg)
	if err != nil {
		return nil, err
	}
	values := make([][]byte, len(secrets))
	for i, sec := range secrets {
		values[i] = sec.Value
	}
	raw, err := secretscan.RawAll(img, values)
	img.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the var partition: %w", err)
	}
	tree := filepath.Join(dir, "var")
	if err := os.Mkdir(tree, 0o700); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "debugfs", "-R", "rdump / "+tree, varImg).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("debugfs rdump of the var partition: %v: %s", err, out)
	}
	fi, err := os.Stat(filepath.Join(tree, storedConfig))
	hasStored := err == nil && fi.Size() > 0
	files := 0
	filepath.WalkDir(tree, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
		}
		return nil
	})
	if err := JudgeDump(files, hasStored, stored); err != nil {
		return nil, err
	}
	hits, err := secretscan.TreeAll(tree, secrets)
	for i := range hits {
		hits[i].Path = "/var/" + hits[i].Path
	}
	sc := &VarScan{Files: files, Hits: hits, Raw: raw}
	// The journal's files keep long fields compressed: what was logged
	// is read back as journalctl shows it.
	if fi, jerr := os.Stat(filepath.Join(tree, "log", "journal")); jerr == nil && fi.IsDir() {
		cmd := exec.CommandContext(ctx, "journalctl", "-D", filepath.Join(tree, "log", "journal"), "-o", "export", "--no-pager")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, jerr := cmd.Output()
		if len(out) == 0 {
			// An older journalctl skips files it cannot read, saying so
			// on stderr: an empty export scanned nothing.
			return nil, fmt.Errorf("reading the node's journal back (journalctl -D /var/log/journal -o export): %v, nothing exported: %s", jerr, strings.TrimSpace(stderr.String()))
		}
		sc.Journal, sc.JournalBytes = true, len(out)
		sc.Hits = append(sc.Hits, secretscan.FindAll("the journal (journalctl -o export)", out, secrets)...)
	}
	bs := int64(4096)
	if out, err := exec.CommandContext(ctx, "debugfs", "-R", "stats", varImg).Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "Block size:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &bs)
			}
		}
	}
	for i, off := range raw {
		if i == 5 {
			break
		}
		block := off / bs
		out, _ := exec.CommandContext(ctx, "debugfs", "-R", fmt.Sprintf("icheck %d", block), varImg).Output()
		owner := strings.TrimSpace(string(out))
		if lines := strings.Split(owner, "\n"); len(lines) > 1 {
			owner = strings.Join(strings.Fields(lines[len(lines)-1]), " ")
		}
		sc.RawOwners = append(sc.RawOwners, fmt.Sprintf("offset %d: block/inode %s", off, owner))
	}
	return sc, err
}

// checkNoSecret shuts the joined node down cleanly and checks that no file
// in its /var holds the bootstrap token's secret.
func (e *Env) checkNoSecret(ctx context.Context, r *Report, in *Instance, when string) {
	e.checkNoSecretIn(ctx, r, in, when, true)
}

// checkNoSecretIn is checkNoSecret; stored says whether the agent must
// have stored its config (see ScanVar).
func (e *Env) checkNoSecretIn(ctx context.Context, r *Report, in *Instance, when string, stored bool) {
	s := time.Now()
	name := "no bootstrap token secret in /var after a clean shutdown (" + when + "); no STS or ACR credential issued to the node in /var or its journal"
	if err := in.VM.Shutdown(3 * time.Minute); err != nil {
		r.add(name, s, err, "")
		return
	}
	secret := nodeconfig.TokenSecret(e.Cluster.BootstrapToken())
	if secret == "" {
		r.add(name, s, fmt.Errorf("the local cluster's bootstrap token is not <id>.<secret>: no secret to look for"), "")
		return
	}
	secrets := append([]secretscan.Secret{{Value: []byte(secret)}}, e.credentialSecrets()...)
	sc, err := ScanVar(ctx, in.Config, secrets, stored)
	if err != nil {
		r.add(name, s, err, "")
		return
	}
	journal := "no persistent journal"
	if sc.Journal {
		journal = fmt.Sprintf("the journal read back (%d bytes exported)", sc.JournalBytes)
	}
	r.add(name, s, JudgeVarScan(sc), fmt.Sprintf("%d secrets (the bootstrap token's and %d STS/ACR credentials issued to the node): %d files scanned (plain, data: URLs, base64, gzip), %s; the partition's blocks read for plain and base64 forms: %d found",
		len(secrets), len(secrets)-1, sc.Files, journal, len(sc.Raw)))
}

// credentialSecrets are the credentials the emulators issued to the node:
// the RAM role's STS AccessKeySecrets and SecurityTokens, and the ACR
// logins' passwords. None may be on the node's disk.
func (e *Env) credentialSecrets() []secretscan.Secret {
	var out []secretscan.Secret
	if e.Metadata != nil {
		for _, c := range e.Metadata.IssuedCredentials() {
			out = append(out, secretscan.Secret{Name: "STS AccessKeySecret of " + c.AccessKeyID, Value: []byte(c.AccessKeySecret)},
				secretscan.Secret{Name: "STS SecurityToken of " + c.AccessKeyID, Value: []byte(c.SecurityToken)})
		}
	}
	if e.ACR != nil {
		for _, l := range e.ACR.Logins() {
			out = append(out, secretscan.Secret{Name: "ACR login password issued with " + l.AccessKeyID, Value: []byte(l.Password)})
		}
	}
	return out
}

// JudgeDump guards the scan: a dump of /var that holds nothing proves
// nothing. With stored, the agent stored its config, so the dump must
// hold it (the file most likely to keep a token).
func JudgeDump(files int, hasStored, stored bool) error {
	switch {
	case files == 0:
		return fmt.Errorf("the dump of /var holds no file: nothing to judge")
	case stored && !hasStored:
		return fmt.Errorf("the dump of /var has no /var/%s: nothing to judge", storedConfig)
	}
	return nil
}

// JudgeVarScan is the token scan's verdict: no file holds the secret in
// any encoding, and no block outside every file holds its plain or base64
// form.
func JudgeVarScan(sc *VarScan) error {
	if sc == nil {
		return fmt.Errorf("no scan of /var")
	}
	var probs []string
	var token, creds []string
	for _, h := range sc.Hits {
		if h.Secret == "" {
			token = append(token, h.String())
		} else {
			creds = append(creds, h.String())
		}
	}
	if len(token) > 0 {
		probs = append(probs, "the bootstrap token's secret is in "+strings.Join(token, "; "))
	}
	if len(creds) > 0 {
		probs = append(probs, "credentials issued to the node are in "+strings.Join(creds, "; "))
	}
	if len(sc.Hits) == 0 && len(sc.Raw) > 0 {
		// No file holds it, so these are blocks no file owns any more.
		probs = append(probs, fmt.Sprintf("the secret's plain or base64 form is on the var partition outside every file: %s", strings.Join(sc.RawOwners, "; ")))
	}
	if sc.Files == 0 {
		probs = append(probs, "no file was scanned")
	}
	return errIf(probs)
}
