// Package gpt plans and writes the GUID partition table of a drover disk
// image, following the UAPI Discoverable Partitions Specification (DPS) so
// systemd and drover-init find the ESP, root and root-verity partitions by
// type GUID alone.
//
// Planning is pure: Plan turns a list of partitions into a Layout (LBAs,
// byte offsets, disk size) that `drover build --plan` prints. Write then
// lays down the protective MBR and the primary and backup GPT headers and
// entry arrays through go-diskfs; partition contents are written by the
// caller at Layout.Parts[i].Offset. ReadLayout reads a table back and checks
// both copies, for `drover verify`.
//
// Nothing here generates randomness: the disk GUID and every partition UUID
// come from the caller (derived from content), so the same inputs give the
// same bytes.
package gpt
