// Package cis judges a booted drover node against the worker-node section
// (4) of the CIS Alibaba Cloud Container Service for Kubernetes (ACK)
// Benchmark v1.0, as kube-bench encodes it (cfg/ack-1.0/node.yaml), plus
// the kubelet checks the newer CIS Kubernetes benchmarks (1.9) added to
// that section: certificate rotation and a pod PID limit.
//
// The evidence is read on the running node by the smoke's privileged probe
// pod (harness/registry/programs/probe, "probe cis"): the real modes and
// owners of the files the kubelet's unit, command line and loaded
// configuration name, the kubelet's command line from /proc, its effective
// configuration from its own /configz endpoint, and which TLS 1.2 cipher
// suites its API actually accepts. Judge is pure: it turns an Evidence into
// one Result per check, each with the evidence that decided it.
package cis

import "github.com/drover-os/drover/harness/registry/programs/cisevidence"

// The evidence types live with the probe that writes them (see
// cisevidence's doc); these names keep the judge's API in one package.
type (
	Evidence  = cisevidence.Evidence
	Unit      = cisevidence.Unit
	File      = cisevidence.File
	KubeProxy = cisevidence.KubeProxy
)

// ModeBits is chmod's number for m.
var ModeBits = cisevidence.ModeBits
