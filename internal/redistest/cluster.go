package redistest

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testport"
)

// CLI is the redis-cli that creates test clusters.
const CLI = "/usr/bin/redis-cli"

// clusterBusOffset is how far above its client port a Redis Cluster node
// listens for the cluster bus.
const clusterBusOffset = 10000

// Cluster is a running Redis Cluster of masters without replicas, owned by
// one test.
type Cluster struct {
	// Nodes are the nodes' servers; Addrs their "127.0.0.1:port".
	Nodes []*Server
	Addrs []string
}

// StartCluster runs n (≥ 3) cluster-enabled redis-servers on free loopback
// ports, joins them with redis-cli --cluster create (slots split evenly) and
// waits until every node reports cluster_state:ok. The nodes stop in
// t.Cleanup, or earlier with Stop.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	Require(t)
	if _, err := exec.LookPath(CLI); err != nil {
		if requireSet() {
			t.Fatalf("redistest: %s not found: %v", CLI, err)
		}
		t.Skipf("redis cluster test skipped: %v", err)
	}
	c := &Cluster{}
	for i := 0; i < n; i++ {
		s := &Server{dir: t.TempDir(), extra: []string{"--cluster-enabled", "yes", "--cluster-node-timeout", "5000"}}
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			// The node's cluster bus port must be free too.
			if s.Port, err = testport.Find(testport.Options{Offsets: []int{0, clusterBusOffset}}); err != nil {
				break
			}
			s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
			if err = s.start(); err == nil {
				break
			}
		}
		if err != nil {
			c.Stop()
			t.Fatalf("redistest: cluster node: %v", err)
		}
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	t.Cleanup(c.Stop)
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(CLI, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(StartTimeout)
	for _, addr := range c.Addrs {
		host, port, _ := net.SplitHostPort(addr)
		for {
			out, err := exec.Command(CLI, "-h", host, "-p", port, "cluster", "info").Output()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: node %s not ok within %v: %s", addr, StartTimeout, out)
			}
			time.Sleep(50 * time.Millisecond) // polling the cluster's readiness
		}
	}
	return c
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		_ = s.Stop()
	}
}
