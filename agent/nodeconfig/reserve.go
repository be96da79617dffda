package nodeconfig

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Reservations are what the kubelet keeps from pods on a node of a given
// size: the kubelet's allocatable is its capacity less KubeReserved,
// SystemReserved and the hard eviction threshold.
//
// KubeReserved follows GKE's published tiered formula ("Node allocatable
// resources", cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes),
// whose CPU table AKS documents too:
//
//	memory: 255 MiB below 1 GiB; else 25 % of the first 4 GiB, 20 % of the
//	        next 4, 10 % of the next 8, 6 % of the next 112, 2 % above 128 GiB
//	CPU:    6 % of the first core, 1 % of the second, 0.5 % of the third
//	        and fourth, 0.25 % of every core above four
//
// It depends on the instance's size alone, unlike EKS's (255 MiB + 11 MiB
// per max pod, tied to ENI-based pod density that a drover node does not
// have), so two instances of one type reserve the same and a larger type
// reserves a smaller share. The inputs are what the kubelet reports as
// capacity: the CPUs the kernel brought online and /proc/meminfo's
// MemTotal.
//
// SystemReserved covers the operating system's own daemons (systemd,
// journald, udevd, networkd, resolved, logind, dbus, timesyncd), a fixed
// amount since they do not grow with the instance; the pids reservations
// keep a fork bomb in the pods from exhausting the kernel's pid space.
type Reservations struct {
	KubeReserved, SystemReserved, EvictionHard map[string]string
	// PodPidsLimit caps the processes of one pod.
	PodPidsLimit int64
}

// Fixed parts of the reservations (see Reservations).
const (
	systemReservedMemoryMiB = 100
	systemReservedMilliCPU  = 50
	systemReservedPids      = 1000
	kubeReservedPids        = 1000
	podPidsLimit            = 4096
	// evictionMemoryMiB is the kubelet's own default memory.available
	// threshold, kept: GKE uses it too.
	evictionMemoryMiB = 100
)

// Graceful node shutdown: on the ACPI power button (ECS StopInstance,
// RebootInstance, ESS scale-in) the kubelet holds logind's delay inhibitor
// for ShutdownGracePeriod and terminates regular pods first, critical pods
// in the last ShutdownGracePeriodCriticalPods. kubelet.config overrides
// both; the kubelet raises logind's InhibitDelayMaxSec to match.
const (
	ShutdownGracePeriod             = 60 * time.Second
	ShutdownGracePeriodCriticalPods = 15 * time.Second
)

// Reserve computes the reservations of a node with cpus online CPUs and
// memTotal bytes of memory (MemTotal). ok is false when either is unknown
// (0): the kubelet then gets none, and the smoke test's allocatable check
// fails on a node where that happens.
func Reserve(cpus int, memTotal uint64) (r Reservations, ok bool) {
	if cpus <= 0 || memTotal == 0 {
		return Reservations{}, false
	}
	return Reservations{
		KubeReserved: map[string]string{
			"cpu":    strconv.FormatInt(kubeReservedMilliCPU(cpus), 10) + "m",
			"memory": strconv.FormatUint(kubeReservedMemoryMiB(memTotal), 10) + "Mi",
			"pid":    strconv.Itoa(kubeReservedPids),
		},
		SystemReserved: map[string]string{
			"cpu":    strconv.Itoa(systemReservedMilliCPU) + "m",
			"memory": strconv.Itoa(systemReservedMemoryMiB) + "Mi",
			"pid":    strconv.Itoa(systemReservedPids),
		},
		// Setting evictionHard replaces the kubelet's defaults as a whole,
		// so the disk thresholds are its defaults, written out.
		EvictionHard: map[string]string{
			"memory.available":  strconv.Itoa(evictionMemoryMiB) + "Mi",
			"nodefs.available":  "10%",
			"nodefs.inodesFree": "5%",
			"imagefs.available": "15%",
		},
		PodPidsLimit: podPidsLimit,
	}, true
}

// kubeReservedMilliCPU is GKE's CPU table in thousandths of a core,
// rounded up: 60 for one core, 70 for two, 80 for four, 90 for eight.
func kubeReservedMilliCPU(cpus int) int64 {
	// In hundred-thousandths of a core, so 0.25 % of a core is whole.
	var u int64
	for c := 1; c <= cpus; c++ {
		switch {
		case c == 1:
			u += 6000
		case c == 2:
			u += 1000
		case c <= 4:
			u += 500
		default:
			u += 250
		}
	}
	return (u + 99) / 100
}

// kubeReservedMemoryMiB is GKE's memory table in MiB, rounded up.
func kubeReservedMemoryMiB(memTotal uint64) uint64 {
	const gib = 1 << 30
	if memTotal < gib {
		return 255
	}
	tiers := []struct {
		upTo    uint64 // bytes; 0: no limit
		percent uint64
	}{{4 * gib, 25}, {8 * gib, 20}, {16 * gib, 10}, {128 * gib, 6}, {0, 2}}
	var reserved, below uint64 // hundredths of a byte
	for _, t := range tiers {
		top := memTotal
		if t.upTo != 0 && t.upTo < top {
			top = t.upTo
		}
		if top > below {
			reserved += (top - below) * t.percent
			below = top
		}
	}
	const mib = 1 << 20
	return (reserved + 100*mib - 1) / (100 * mib)
}

// Allocatable gives what the kubelet reports as allocatable for a node
// whose capacity is cpus and memTotal under r: CPU in millicores and
// memory in bytes (capacity less the reservations and, for memory, the
// hard eviction threshold).
func (r Reservations) Allocatable(cpus int, memTotal uint64) (milliCPU, memory int64, err error) {
	milliCPU = int64(cpus) * 1000
	memory = int64(memTotal)
	sub := func(m map[string]string, key string, milli bool) {
		if err != nil || m[key] == "" {
			return
		}
		q, perr := resource.ParseQuantity(m[key])
		if perr != nil {
			err = fmt.Errorf("%s %q: %w", key, m[key], perr)
			return
		}
		if milli {
			milliCPU -= q.MilliValue()
		} else {
			memory -= q.Value()
		}
	}
	for _, m := range []map[string]string{r.KubeReserved, r.SystemReserved} {
		sub(m, "cpu", true)
		sub(m, "memory", false)
	}
	sub(r.EvictionHard, "memory.available", false)
	return milliCPU, memory, err
}
