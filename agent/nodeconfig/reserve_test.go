package nodeconfig

import (
	"strings"
	"testing"
)

// The figures GKE's "Node allocatable resources" page works out for its
// machine sizes, rounded up to whole MiB and millicores.
func TestReserveFollowsGKETable(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		cpus   int
		mem    uint64
		cpu    string
		memory string
	}{
		{1, 512 << 20, "60m", "255Mi"},
		{1, gib, "60m", "256Mi"},
		{2, 4 * gib, "70m", "1024Mi"},
		{3, 6 * gib, "75m", "1434Mi"}, // 1024 + 20 % of 2 GiB = 1433.6
		{4, 8 * gib, "80m", "1844Mi"}, // 1843.2
		{8, 16 * gib, "90m", "2663Mi"},
		{16, 128 * gib, "110m", "9544Mi"},  // + 6 % of 112 GiB
		{64, 256 * gib, "230m", "12166Mi"}, // + 2 % of 128 GiB
	} {
		r, ok := Reserve(tc.cpus, tc.mem)
		if !ok || r.KubeReserved["cpu"] != tc.cpu || r.KubeReserved["memory"] != tc.memory {
			t.Errorf("Reserve(%d, %d MiB) = %v %v, want cpu %s memory %s", tc.cpus, tc.mem>>20, r.KubeReserved, ok, tc.cpu, tc.memory)
		}
	}
	for _, tc := range []struct {
		cpus int
		mem  uint64
	}{{0, gib}, {2, 0}, {-1, gib}} {
		if r, ok := Reserve(tc.cpus, tc.mem); ok || r.KubeReserved != nil {
			t.Errorf("Reserve(%d, %d) = %v, %v; want nothing for an unknown size", tc.cpus, tc.mem, r, ok)
		}
	}
}

func TestAllocatable(t *testing.T) {
	// 2 vCPUs, MemTotal 3000 MiB: kube 70m + system 50m; 25 % of 3000 =
	// 750 Mi + 100 Mi system + 100 Mi eviction.
	r, _ := Reserve(2, 3000<<20)
	cpu, mem, err := r.Allocatable(2, 3000<<20)
	if err != nil || cpu != 1880 || mem != (3000-750-100-100)<<20 {
		t.Errorf("Allocatable = %dm %d MiB %v; want 1880m 2050 MiB", cpu, mem>>20, err)
	}
	// A node file's override in any quantity form.
	r.KubeReserved["memory"] = "1Gi"
	r.KubeReserved["cpu"] = "0.5"
	if cpu, mem, err := r.Allocatable(2, 3000<<20); err != nil || cpu != 1450 || mem != (3000-1024-200)<<20 {
		t.Errorf("with overrides: %dm %d MiB %v; want 1450m 1776 MiB", cpu, mem>>20, err)
	}
	r.SystemReserved["memory"] = "lots"
	if _, _, err := r.Allocatable(2, 3000<<20); err == nil || !strings.Contains(err.Error(), `memory "lots"`) {
		t.Errorf("bad quantity: %v", err)
	}
}

// Without the instance's size the kubelet gets no reservations (and the
// smoke test's allocatable check fails): never made-up ones.
func TestKubeletConfigReservations(t *testing.T) {
	c := load(t, "minimal")
	got, err := KubeletConfig(c, facts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubeReserved:\n  cpu: 80m\n  memory: 2588Mi\n", "shutdownGracePeriod: 1m0s\n", "shutdownGracePeriodCriticalPods: 15s\n", "podPidsLimit: 4096\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("kubelet config lacks %q:\n%s", want, got)
		}
	}
	bare := facts
	bare.CPUs, bare.MemTotal = 0, 0
	got, err = KubeletConfig(c, bare)
	if err != nil || strings.Contains(string(got), "Reserved") || strings.Contains(string(got), "evictionHard") {
		t.Errorf("no size: %v\n%s", err, got)
	}
}
