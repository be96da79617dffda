// Package nodeconfig reads the node file /etc/drover/node.yaml, which tells
// drover-agent how a node joins its cluster, and renders from it the
// configuration of the kubelet and of containerd.
//
// The node file arrives inside the Ignition user-data as a storage.files
// entry; the agent's Ignition apply writes it, and the join phase reads it
// with Parse. Every render function here is pure: it takes the parsed Config
// and the instance facts (from the ECS metadata service) and returns bytes,
// so the output can be checked against golden files and printed before
// anything is written (see docs/node-config.md for the schema).
package nodeconfig
