package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/drover-os/drover/internal/atomicfile"
)

// ReadRecord reads the record at path; nil, nil when there is none (a
// first boot).
func ReadRecord(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the data disk record: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("reading the data disk record %s: %w", path, err)
	}
	switch r.State {
	case StateFormatting, StateReady:
		if r.UUID == "" {
			return nil, fmt.Errorf("reading the data disk record %s: state %s without a uuid", path, r.State)
		}
	case StateSystem:
	default:
		return nil, fmt.Errorf("reading the data disk record %s: unknown state %q", path, r.State)
	}
	return &r, nil
}

// WriteRecord replaces the record at path, atomically: a crash leaves the
// old record or the new one.
func WriteRecord(path string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording the data disk: %w", err)
	}
	return nil
}
