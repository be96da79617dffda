package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// droverBin is the drover binary built once for the CLI tests.
var droverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "drover-cli-test")
	if err != nil {
		panic(err)
	}
	droverBin = filepath.Join(dir, "drover")
	build := exec.Command("go", "build", "-o", droverBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building drover: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// drover runs the CLI and returns stdout, stderr and the exit code.
func drover(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(droverBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}
