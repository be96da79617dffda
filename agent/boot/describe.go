package boot

import (
	"fmt"
	"path"
	"strings"
)

// The describe functions say what each step will do; with a config they
// name the values it will use. They are what `drover-init --plan` prints.

func describeMountAPI(*Config) string {
	return "mount proc at /proc, sysfs at /sys, devtmpfs at /dev, tmpfs at /run; log to /dev/kmsg and /dev/console"
}

func describeConfig(*Config) string {
	return "read " + ConfigPath + " and /proc/cmdline; drover.roothash= must equal the config's root hash"
}

func describeModules(c *Config) string {
	if c == nil {
		return "load the config's kernel modules in order (finit_module; .ko.xz decompressed by the kernel or in Go)"
	}
	if len(c.Modules) == 0 {
		return "no modules to load (the kernel has the drivers built in)"
	}
	names := make([]string, len(c.Modules))
	for i, m := range c.Modules {
		names[i] = strings.TrimSuffix(strings.TrimSuffix(path.Base(m), ".xz"), ".ko")
	}
	return fmt.Sprintf("load %d modules from /lib/modules/%s: %s", len(c.Modules), c.Kernel, strings.Join(names, " "))
}

func describePartitions(c *Config) string {
	if c == nil {
		return fmt.Sprintf("wait up to %s for the root and root-verity partitions by PARTUUID", PartitionWait)
	}
	return fmt.Sprintf("wait up to %s for PARTUUID %s (root) and %s (root-verity)", PartitionWait, c.RootPartUUID, c.VerityPartUUID)
}

func describeVerity(c *Config) string {
	s := "create the dm-verity device " + verityName + " (read-only, " + corruptionPolicy + ")"
	if c != nil {
		s += fmt.Sprintf(" over %d data blocks of %d bytes, root hash %s", c.Verity.DataBlocks, c.Verity.DataBlockSize, c.RootHash)
	}
	return s
}

func describeMountRoot(*Config) string {
	return "mount the verity device as erofs, read-only, at /sysroot"
}

func describeReadAhead(c *Config) string {
	if c == nil {
		return "start reading the config's files of the root into the page cache, without waiting (they are read and verified while the boot goes on)"
	}
	if len(c.ReadAhead) == 0 {
		return "nothing to read ahead"
	}
	return "start reading " + strings.Join(c.ReadAhead, " ") + " from /sysroot into the page cache, without waiting"
}

func describeVarPartition(c *Config) string {
	if c == nil {
		return "find the var partition on the boot disk; first boot: move the backup GPT to the disk's end and add it over the free space"
	}
	return fmt.Sprintf("find the partition of type %s on the boot disk; first boot: move the backup GPT to the disk's end and add it, named %q, over the free space",
		c.VarPartType, c.VarLabel)
}

func describeVarFormat(c *Config) string {
	label := "the config's label"
	if c != nil {
		label = c.VarLabel
	}
	return "if the var partition has no ext4 superblock, run the image's mke2fs -t ext4 -L " + label + " in /sysroot"
}

func describeVarMount(*Config) string { return "mount the var partition (ext4) at /sysroot/var" }

func describeEtcOverlay(*Config) string {
	return "mount tmpfs at /run/drover-etc and an overlay of it over /sysroot/etc: /etc is writable and rebuilt every boot"
}

func describeMachineID(*Config) string {
	return "keep the machine-id in /sysroot/" + StoredMachineIDPath + " (made on first boot) and write it to /sysroot/" + EtcMachineIDPath
}

func describeMoveMounts(*Config) string { return "move /dev, /proc, /sys and /run into /sysroot" }

func describeSwitchRoot(*Config) string {
	return "delete the initrd's files, make /sysroot the root and exec " + initCandidates[0] + " (else " + strings.Join(initCandidates[1:], ", ") + ")"
}
