package gomod

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleDir: the directory of a module from the fake proxy, with its
// files; a version the proxy does not have is an error naming it.
func TestModuleDir(t *testing.T) {
	env := fakeProxyEnv(t)
	dir, err := ModuleDir(context.Background(), env, "example.com/mono", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "cmd", "hello", "main.go"))
	if err != nil || !strings.Contains(string(data), "lib.Greeting") {
		t.Errorf("module dir %s: main.go %q, %v", dir, data, err)
	}
	if _, err := ModuleDir(context.Background(), env, "example.com/mono", "v9.9.9"); err == nil || !strings.Contains(err.Error(), "example.com/mono@v9.9.9") {
		t.Errorf("missing version: %v, want an error naming example.com/mono@v9.9.9", err)
	}
}
