package deb

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/drover-os/drover/image/tree"
)

// ExtractAll extracts the .deb files paths maps package names to, decoding
// up to parallel of them at once (0 means one per CPU), and adds them to t
// strictly in order, so the tree, and which package a conflict error blames,
// are the same on every run. order must name every package of paths
// exactly once.
func ExtractAll(paths map[string]string, order []string, t *tree.Tree, opt Options, parallel int) error {
	if err := checkOrder(paths, order); err != nil {
		return err
	}
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}

	type result struct {
		nodes []*tree.Node
		err   error
		done  chan struct{}
	}
	results := make([]result, len(order))
	for i := range results {
		results[i].done = make(chan struct{})
	}
	var stop atomic.Bool // set on the first failure: decoding the rest is wasted work
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(order)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if !stop.Load() {
					results[i].nodes, results[i].err = decodeFile(paths[order[i]], order[i], opt)
				}
				close(results[i].done)
			}
		}()
	}
	go func() {
		// Handing out indexes in order means the package the adder waits
		// for next is always being decoded or already done.
		for i := range order {
			jobs <- i
		}
		close(jobs)
	}()

	var err error
	for i := range order {
		<-results[i].done
		if err == nil && results[i].err != nil {
			err = results[i].err
		}
		if err == nil {
			err = addNodes(t, order[i], results[i].nodes)
		}
		if err != nil {
			stop.Store(true)
		}
		results[i].nodes = nil // the tree holds them now; let the slice go
	}
	wg.Wait()
	return err
}

func checkOrder(paths map[string]string, order []string) error {
	inOrder := make(map[string]bool, len(order))
	for _, pkg := range order {
		if inOrder[pkg] {
			return fmt.Errorf("extracting packages: %s is listed twice in the order", pkg)
		}
		inOrder[pkg] = true
		if _, ok := paths[pkg]; !ok {
			return fmt.Errorf("extracting packages: no .deb path for %s", pkg)
		}
	}
	for pkg := range paths {
		if !inOrder[pkg] {
			return fmt.Errorf("extracting packages: %s has a .deb but is missing from the order", pkg)
		}
	}
	return nil
}

func decodeFile(path, pkg string, opt Options) ([]*tree.Node, error) {
	if opt.Unpacked != nil {
		if rc, ok := opt.Unpacked.Get(path); ok {
			defer rc.Close()
			nodes, err := readDataTar(rc, "data.tar", pkg, opt, &Stats{Package: pkg})
			if err == nil {
				return nodes, nil
			}
			// A damaged kept copy is not trusted: decode the .deb.
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("extracting %s: %w", pkg, err)
	}
	defer f.Close()
	commit := func(bool) {}
	if opt.Unpacked != nil {
		opt.tee, commit = opt.Unpacked.Put(path)
	}
	nodes, _, err := decode(f, pkg, opt) // decompress buffers each member
	commit(err == nil)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return nodes, nil
}
