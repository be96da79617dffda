package nodeconfig

// The values of the node file's storage field: where containerd's content
// and the kubelet's pod directories live (agent/storage decides, the
// agent applies).
const (
	// StorageAuto uses the one empty data disk if there is exactly one,
	// and otherwise stays on the system disk, saying why.
	StorageAuto = "auto"
	// StorageRequired is auto that refuses to join without a data disk.
	StorageRequired = "required"
	// StorageSystem never uses a data disk.
	StorageSystem = "system"
)

var storageModes = []string{StorageAuto, StorageRequired, StorageSystem}
