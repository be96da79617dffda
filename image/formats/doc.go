// Package formats converts a raw drover disk image into the formats ECS
// ImportImage accepts besides RAW: qcow2 (compressed, sparse) and fixed VHD.
//
// Both writers stream: they read the raw image once, in order, and hold only
// a few clusters and the qcow2 mapping tables in memory. Both are
// deterministic: the same raw bytes and arguments give the same output, also
// when qcow2 clusters are compressed on several cores.
package formats
