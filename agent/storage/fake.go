package storage

import "fmt"

// Fake is an in-memory System for tests: Format records the call and
// gives the disk the filesystem, as mkfs would.
type Fake struct {
	List      []Disk
	FormatErr error
	Formatted []string // "dev uuid"
}

// Disks returns List.
func (f *Fake) Disks() ([]Disk, error) { return f.List, nil }

// Format records dev and uuid and gives the disk an ext4 filesystem.
func (f *Fake) Format(dev, uuid string) error {
	f.Formatted = append(f.Formatted, dev+" "+uuid)
	if f.FormatErr != nil {
		return f.FormatErr
	}
	for i := range f.List {
		if f.List[i].Path == dev {
			f.List[i].Probe = Probe{Found: true, Type: "ext4", UUID: uuid}
			return nil
		}
	}
	return fmt.Errorf("formatting %s: no such disk", dev)
}
