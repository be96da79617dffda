package fetch

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The two-process test re-executes this test binary; these variables tell
// the child what to fetch.
const (
	childEnv      = "DROVER_FETCH_TEST_CHILD"
	childCacheEnv = "DROVER_FETCH_TEST_CACHE"
	childURLEnv   = "DROVER_FETCH_TEST_URL"
)

const (
	procItems = 40
	procSize  = 200 << 10
)

func procItemList(base string) []Item {
	var items []Item
	for i := range procItems {
		data := content(i, procSize)
		items = append(items, Item{Name: itemName(i), URL: base + "/" + itemName(i), SHA256: sum(data), Size: procSize})
	}
	return items
}

// childMain is the second drover process: it says "ready", waits for "go"
// on stdin so both processes start together, fetches, and verifies.
func childMain() int {
	c, err := openCacheErr(os.Getenv(childCacheEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "waiting for go:", err)
		return 1
	}
	items := procItemList(os.Getenv(childURLEnv))
	var log strings.Builder
	f := &Fetcher{Retry: fast(4), Cache: c, HTTP: http.DefaultClient, Parallel: 3, Log: &log}
	paths, err := f.Fetch(context.Background(), items)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, it := range items {
		if ok, actual, err := c.Check(it.SHA256); !ok || err != nil || paths[it.SHA256] != c.Path(it.SHA256) {
			fmt.Fprintf(os.Stderr, "%s: path %q does not verify (got %s, %v)\n", it.Name, paths[it.SHA256], actual, err)
			return 1
		}
	}
	fmt.Printf("downloaded %d\n", strings.Count(log.String(), "fetched "))
	return 0
}

func TestTwoProcessesShareCache(t *testing.T) {
	srv := newFileServer(t)
	for i := range procItems {
		srv.add(itemName(i), content(i, procSize))
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childCacheEnv+"="+dir, childURLEnv+"="+srv.URL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	childOut := bufio.NewReader(stdout)
	line, err := childOut.ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Wait()
		t.Fatalf("child did not get ready (%q, %v): %s", line, err, stderr.String())
	}

	c := openCache(t, dir)
	var log syncBuffer
	f := &Fetcher{Retry: fast(4), Cache: c, HTTP: srv.Client(), Parallel: 3, Log: &log}
	items := procItemList(srv.URL)
	fmt.Fprintln(stdin, "go")
	paths, ferr := f.Fetch(context.Background(), items)
	childReport, _ := childOut.ReadString('\n')
	werr := cmd.Wait()
	t.Logf("parent downloaded %d, child %s", strings.Count(log.String(), "fetched "), strings.TrimSpace(childReport))
	if ferr != nil {
		t.Errorf("parent fetch: %v", ferr)
	}
	if werr != nil {
		t.Fatalf("child: %v\n%s", werr, stderr.String())
	}
	for i, it := range items {
		checkFile(t, paths[it.SHA256], content(i, procSize))
		if n := srv.hitCount(itemName(i)); n != 1 {
			t.Errorf("%s downloaded %d times by two processes, want once", it.Name, n)
		}
	}
	assertNoFiles(t, c.TempDir())
}
