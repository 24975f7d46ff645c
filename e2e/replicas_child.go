package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kvroute/kvroute"
	kvcluster "github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/gateway"
)

// envReplicaGateway carries, to a re-executed copy of the demo's own binary,
// the settings of the replica gateway it is to run (JSON of gatewaySpec).
const envReplicaGateway = "KVROUTE_DEMO_REPLICA_GATEWAY"

// gatewaySpec is what a replica gateway needs: the shared Redis, its
// replica ID and the engines.
type gatewaySpec struct {
	Redis     string             `json:"redis"`
	ReplicaID string             `json:"replicaId"`
	Model     string             `json:"model"`
	BlockSize int                `json:"blockSize"`
	Endpoints []kvroute.Endpoint `json:"endpoints"`
}

// Replica timing of the demo's pool: short periods so the demo shows a
// dead gateway's load leaving within seconds.
const (
	demoLease   = 2 * time.Second
	demoRefresh = 100 * time.Millisecond
	demoRead    = 100 * time.Millisecond
)

// serverConfig is a replica gateway's configuration: precise routing with
// KV events from every engine and the cluster option on the shared Redis.
func (g gatewaySpec) serverConfig() gateway.ServerConfig {
	cfg := kvroute.DefaultConfig()
	cfg.Model = g.Model
	cfg.BlockSize = g.BlockSize
	cfg.Events.Enabled = new(true)
	cfg.Cluster = kvcluster.Config{Addrs: []string{g.Redis}, Pool: "demo", ReplicaID: g.ReplicaID,
		Lease: demoLease, RefreshPeriod: demoRefresh, ReadPeriod: demoRead}
	return gateway.ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: g.Endpoints}
}

// RunReplicaGatewayChild runs a replica gateway when this process is one
// the --replicas demo started (the environment says so) and returns true
// once the gateway ends (the demo kills it with SIGKILL; SIGTERM or a
// closed standard input stop it cleanly); otherwise it returns false at
// once. The demo's main calls it first, and so do the tests' TestMain.
func RunReplicaGatewayChild() bool {
	spec := os.Getenv(envReplicaGateway)
	if spec == "" {
		return false
	}
	if err := runChild(spec); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	return true
}

func runChild(spec string) error {
	var g gatewaySpec
	if err := json.Unmarshal([]byte(spec), &g); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	gw, err := gateway.NewServer(ctx, g.serverConfig(), gateway.Options{})
	if err != nil {
		return err
	}
	fmt.Println("listening", gw.URL())
	go func() { // the parent's end of stdin closes when it exits: do not outlive it
		var b [1]byte
		_, _ = os.Stdin.Read(b[:])
		stop()
	}()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return gw.Shutdown(sctx)
}
