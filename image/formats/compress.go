package formats

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
)

const (
	// compressWorkers is fixed, not taken from the machine, so the work
	// split never depends on where the build runs (the output would not
	// anyway: every cluster is compressed on its own).
	compressWorkers = 2
	// inFlight bounds the clusters read ahead of the writer.
	inFlight = 8 * compressWorkers
	// deflateWindow matches qemu, which deflates clusters with a 4 KiB
	// window (windowBits -12) and inflates them the same way; a larger
	// window could reach back further than a strict reader allows.
	deflateWindow = 4096
)

type clusterJob struct {
	index      int64
	data       []byte // the guest cluster, zero-padded at the end of the image
	out        bytes.Buffer
	zero       bool
	compressed bool
	err        error
	done       chan struct{}
}

// compressClusters reads src cluster by cluster, skips all-zero clusters,
// deflates the others on compressWorkers goroutines when compress is set,
// and calls emit for each non-zero cluster in guest order with either the
// deflated bytes (compressed) or the raw cluster.
func compressClusters(src io.ReaderAt, size int64, compress bool, emit func(index int64, data []byte, compressed bool) error) error {
	pool := sync.Pool{New: func() any { return &clusterJob{data: make([]byte, clusterSize), done: make(chan struct{}, 1)} }}
	work := make(chan *clusterJob)
	ordered := make(chan *clusterJob, inFlight)
	quit := make(chan struct{})
	var wg sync.WaitGroup

	for range compressWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			zw, _ := flate.NewWriterWindow(nil, deflateWindow) // the window is a valid constant
			for job := range work {
				job.zero = isZero(job.data)
				if !job.zero && compress {
					job.out.Reset()
					zw.Reset(&job.out)
					_, err := zw.Write(job.data)
					if err == nil {
						err = zw.Close()
					}
					job.err = err
					job.compressed = err == nil && job.out.Len() < clusterSize
				}
				job.done <- struct{}{}
			}
		}()
	}

	wg.Add(1)
	go func() { // reader: jobs go to a worker and, in order, to the writer
		defer wg.Done()
		defer close(work)
		defer close(ordered)
		for i := int64(0); i*clusterSize < size; i++ {
			job := pool.Get().(*clusterJob)
			job.index, job.err, job.zero, job.compressed = i, nil, false, false
			n := min(clusterSize, size-i*clusterSize)
			clear(job.data[n:])
			if got, err := src.ReadAt(job.data[:n], i*clusterSize); int64(got) < n {
				if err == nil || err == io.EOF {
					err = errShortRead
				}
				job.err = fmt.Errorf("reading guest cluster %d at offset %d: %w", i, i*clusterSize, err)
				job.done <- struct{}{}
				select {
				case ordered <- job:
				case <-quit:
				}
				return
			}
			select {
			case ordered <- job:
			case <-quit:
				return
			}
			select {
			case work <- job:
			case <-quit:
				return
			}
		}
	}()

	defer wg.Wait()
	defer close(quit)
	for job := range ordered {
		<-job.done
		if job.err != nil {
			return job.err
		}
		var err error
		switch {
		case job.zero:
		case job.compressed:
			err = emit(job.index, job.out.Bytes(), true)
		default:
			err = emit(job.index, job.data, false)
		}
		if err != nil {
			return err
		}
		pool.Put(job)
	}
	return nil
}
