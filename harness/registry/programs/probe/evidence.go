package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// run is one line a smoke unit wrote: the boot it ran in and its PID.
type run struct {
	BootID string `json:"bootId"`
	PID    int    `json:"pid"`
	Alive  bool   `json:"alive"`          // /proc/<pid> exists now, in this boot
	Comm   string `json:"comm,omitempty"` // its /proc/<pid>/comm
}

type unitState struct {
	Active string `json:"active"`
	Sub    string `json:"sub"`
	Result string `json:"result"`
}

// showUnit reads a unit's ActiveState, SubState and Result with the
// node's own systemctl.
func showUnit(unit string) (unitState, error) {
	var st unitState
	out, err := hostCommand("/usr/bin/systemctl", "show", "--no-pager", "-p", "ActiveState,SubState,Result", unit)
	if err != nil {
		return st, err
	}
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
		switch k {
		case "ActiveState":
			st.Active = v
		case "SubState":
			st.Sub = v
		case "Result":
			st.Result = v
		}
	}
	return st, nil
}

type evidenceReport struct {
	BootID string               `json:"bootId"` // /proc/sys/kernel/random/boot_id now
	Runs   map[string][]run     `json:"runs"`   // file name -> its lines
	Units  map[string]unitState `json:"units"`
	// KubeletEnv is the value of NO_PROXY (smoke.DropinEnv) in the running
	// kubelet's environment (/proc/<pid>/environ): set only if the
	// user-data's drop-in was loaded before systemd started it.
	KubeletEnv *string `json:"kubeletEnv"`
	// MaxMapCount is /proc/sys/vm/max_map_count now: the user-data's
	// sysctl.d file sets it, the kernel's default is 65530.
	MaxMapCount string   `json:"maxMapCount"`
	Errors      []string `json:"errors,omitempty"`
}

// processEnv returns the value of key in the environment of the process
// called comm (the first found), or nil.
func processEnv(comm, key string) (*string, error) {
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, c := range comms {
		b, err := os.ReadFile(c)
		if err != nil || strings.TrimSpace(string(b)) != comm {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(c), "environ"))
		if err != nil {
			return nil, err
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte(key+"=")); ok {
				s := string(v)
				return &s, nil
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("no %s process", comm)
}

// evidence reads what the smoke's units wrote under the node's /var/dir.
func evidence(dir string, units []string) evidenceReport {
	r := evidenceReport{Runs: map[string][]run{}, Units: map[string]unitState{}}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	r.BootID = strings.TrimSpace(string(b))
	root := filepath.Join(hostRoot, "var", dir)
	entries, err := os.ReadDir(root)
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(root, e.Name()))
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
			continue
		}
		runs := []run{}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			pid, _ := strconv.Atoi(f[1])
			rn := run{BootID: f[0], PID: pid}
			if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && f[0] == r.BootID {
				rn.Alive, rn.Comm = true, strings.TrimSpace(string(comm))
			}
			runs = append(runs, rn)
		}
		r.Runs[e.Name()] = runs
	}
	if r.KubeletEnv, err = processEnv("kubelet", "NO_PROXY"); err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err != nil {
		r.Errors = append(r.Errors, err.Error())
	} else {
		r.MaxMapCount = strings.TrimSpace(string(b))
	}
	for _, u := range units {
		st, err := showUnit(u)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
			continue
		}
		r.Units[u] = st
	}
	return r
}

type securityReport struct {
	Overall string   `json:"overall"`           // "→ Overall exposure level for X: 4.2 OK 🙂"
	Exposed []string `json:"exposed,omitempty"` // the ✗ lines, squeezed, as many as fit
	PID     int      `json:"pid"`               // the unit's MainPID
	Caps    []string `json:"caps,omitempty"`    // Cap*, NoNewPrivs and Seccomp lines of /proc/<pid>/status
	Error   string   `json:"error,omitempty"`
}

// security runs the node's own systemd-analyze security on unit and reads
// the capabilities its main process holds now.
func security(unit string) securityReport {
	var r securityReport
	out, err := hostCommand("/usr/bin/systemd-analyze", "security", "--no-pager", unit)
	if err != nil {
		// systemd-analyze security exits non-zero above its threshold;
		// the output still carries the verdict.
		r.Error = err.Error()
	}
	var exposed []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		switch {
		case strings.Contains(l, "Overall exposure level"):
			r.Overall = l
		case strings.HasPrefix(l, "✗"):
			exposed = append(exposed, l)
		}
	}
	if pid, err := hostCommand("/usr/bin/systemctl", "show", "--no-pager", "-p", "MainPID", "--value", unit); err == nil {
		r.PID, _ = strconv.Atoi(strings.TrimSpace(pid))
	}
	if r.PID > 0 {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.PID)); err == nil {
			for _, l := range strings.Split(string(st), "\n") {
				if strings.HasPrefix(l, "Cap") || strings.HasPrefix(l, "NoNewPrivs") || strings.HasPrefix(l, "Seccomp:") {
					r.Caps = append(r.Caps, strings.Join(strings.Fields(l), " "))
				}
			}
		}
	}
	used := len(r.Overall) + len(r.Error) + 400
	for _, c := range r.Caps {
		used += len(c) + 4
	}
	for _, l := range exposed {
		if used+len(l)+4 > terminationLimit {
			break
		}
		used += len(l) + 4
		r.Exposed = append(r.Exposed, l)
	}
	return r
}

// putEtc writes content into the node's /etc through the read-write host
// mount and reads it back through PID 1's root.
func putEtc(rel, b64, mode string) error {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		return fmt.Errorf("mode %q: %w", mode, err)
	}
	p := filepath.Join("/host-etc", filepath.Clean("/"+rel))
	if err := os.WriteFile(p, data, os.FileMode(m)); err != nil {
		return err
	}
	if err := os.Chmod(p, os.FileMode(m)); err != nil {
		return err
	}
	back, err := os.ReadFile(filepath.Join(hostRoot, "etc", filepath.Clean("/"+rel)))
	if err != nil {
		return fmt.Errorf("reading it back: %w", err)
	}
	if !bytes.Equal(back, data) {
		return fmt.Errorf("/etc/%s reads back %d bytes, want %d", rel, len(back), len(data))
	}
	return nil
}
