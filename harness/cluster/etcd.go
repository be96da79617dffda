package cluster

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdReadyTimeout bounds how long a single-member etcd may take to elect
// itself and open its backend (slow disks under a loaded CI machine).
const etcdReadyTimeout = 2 * time.Minute

// startEtcd runs a single-member etcd inside this process, listening on
// 127.0.0.1 only. Both URLs use port 0: the kernel picks free ports, so
// several clusters can run side by side, and the advertised peer URL stays
// the same string across restarts of a kept data dir (a single member never
// dials its peers). The client URL to hand to kube-apiserver is read from
// the listener afterwards.
func startEtcd(ctx context.Context, dataDir, logFile string) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.Name = "drover"
	cfg.Dir = dataDir
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The JSON gateway would dial the advertised address (port 0); only
	// gRPC is needed by kube-apiserver.
	cfg.EnableGRPCGateway = false
	// Unset, the threshold is 0 and every request is logged as slow.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{logFile}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("starting etcd in %s: %w (see %s)", dataDir, err, logFile)
	}
	timer := time.NewTimer(etcdReadyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("starting etcd in %s: %w (see %s)", dataDir, err, logFile)
	case <-timer.C:
		e.Close()
		return nil, "", fmt.Errorf("starting etcd in %s: not ready after %s (see %s)", dataDir, etcdReadyTimeout, logFile)
	case <-ctx.Done():
		e.Close()
		return nil, "", fmt.Errorf("starting etcd in %s: %w", dataDir, ctx.Err())
	}
	if len(e.Clients) == 0 {
		e.Close()
		return nil, "", fmt.Errorf("starting etcd in %s: no client listener", dataDir)
	}
	return e, "http://" + e.Clients[0].Addr().String(), nil
}
