package extproc

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// GatewayFollowingEPPRouting: the suite checks that the gateway sends every
// request to an endpoint of the list the picker returned: with the
// selection header naming one, two or all three pods' IPs, 100 requests (10
// at a time) each land on one of the named pods, after each pod was pinned
// once. Here the same, and the picker's list is all the proxy ever uses:
// kvroute keeps its pick and its fallbacks inside the selection.
func TestGatewayFollowingEPPRouting(t *testing.T) {
	defer leakcheck.Check(t)()
	pool := newSuitePool(t, "primary-inference-model-server", []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}, 1)
	defer pool.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	pods := pool.pods

	for name, path := range suitePaths("/primary-gateway-test") {
		t.Run(name, func(t *testing.T) {
			for _, pod := range pods { // each pod pinned once
				res, err := send(client, pool.envoy.URL, path, pod.ip)
				require.NoError(t, err)
				require.Equal(t, pod.name, res.echo.Pod)
			}
			for _, tc := range []struct {
				name string
				pods []*suitePod
			}{
				{"should route traffic to a single designated pod", pods[2:3]},
				{"should route traffic to two designated pods", pods[0:2]},
				{"should route traffic to all available pods", pods},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var ips, names []string
					for _, p := range tc.pods {
						ips, names = append(ips, p.ip), append(names, p.name)
					}
					hit := map[string]*atomic.Int64{}
					for _, n := range names {
						hit[n] = new(atomic.Int64)
					}
					sendMany(t, client, pool.envoy.URL, path, strings.Join(ips, ","), 100, 10, func(r suiteResult) error {
						c, ok := hit[r.echo.Pod]
						if !ok {
							return fmt.Errorf("request was handled by an unexpected pod %q", r.echo.Pod)
						}
						c.Add(1)
						return nil
					})
				})
			}
		})
	}
}

// GatewayFollowingEPPRoutingWithDataParallelism: each pod serves three
// data-parallel ranks on three target ports. The suite's selection names a
// pod by IP (any rank) or by IP:port (that rank), and checks that every
// request lands on a named pod and, where ports were named, on one of them.
// Here the pods' ranks are ports of one loopback address each.
func TestGatewayFollowingEPPRoutingWithDataParallelism(t *testing.T) {
	defer leakcheck.Check(t)()
	pool := newSuitePool(t, "dp-inference-model-server", []string{"127.0.0.5", "127.0.0.6", "127.0.0.7"}, 3)
	defer pool.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	b := pool.pods

	for name, path := range suitePaths("/primary-gateway-dp-test") {
		t.Run(name, func(t *testing.T) {
			for _, pod := range b {
				res, err := send(client, pool.envoy.URL, path, pod.ip)
				require.NoError(t, err)
				require.Equal(t, pod.name, res.echo.Pod)
			}
			for _, tc := range []struct {
				name  string
				ports map[*suitePod][]string // empty: any rank
			}{
				{"DP routes only to one designated pod (any rank)", map[*suitePod][]string{b[1]: nil}},
				{"DP routes only to two designated pods; one has a fixed rank", map[*suitePod][]string{b[0]: nil, b[2]: {b[2].ports[1]}}},
				{"DP routes to all pods; one pod restricted to two ranks", map[*suitePod][]string{b[0]: nil, b[1]: {b[1].ports[0], b[1].ports[2]}, b[2]: nil}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var tokens []string
					for _, pod := range b {
						ports, ok := tc.ports[pod]
						switch {
						case !ok:
						case len(ports) == 0:
							tokens = append(tokens, pod.ip)
						default:
							for _, port := range ports {
								tokens = append(tokens, net.JoinHostPort(pod.ip, port))
							}
						}
					}
					var seen atomic.Int64
					sendMany(t, client, pool.envoy.URL, path, strings.Join(tokens, ","), 100, 10, func(r suiteResult) error {
						pod := pool.pod(r.echo.Pod)
						allowed, ok := tc.ports[pod]
						if pod == nil || !ok {
							return fmt.Errorf("unexpected pod %q", r.echo.Pod)
						}
						if len(allowed) == 0 {
							allowed = pod.ports
						}
						if !slices.Contains(allowed, r.echo.HTTPPort) {
							return fmt.Errorf("unexpected httpPort %q for pod %s (allowed: %v)", r.echo.HTTPPort, pod.name, allowed)
						}
						seen.Add(1)
						return nil
					})
					require.EqualValues(t, 100, seen.Load())
				})
			}
		})
	}
}

// GatewayDestinationEndpointServed: the suite pins each pod in turn and
// checks the response's x-conformance-test-served-endpoint, which the
// picker copies from the served-endpoint metadata the gateway reports, is
// that pod's ip:port. Here the same, and one more case the suite cannot
// stage: the pinned pick's connection fails, the proxy falls back to the
// next endpoint of the picker's list, and the header names the fallback
// that really answered.
func TestGatewayDestinationEndpointServed(t *testing.T) {
	defer leakcheck.Check(t)()
	pool := newSuitePool(t, "primary-inference-model-server", []string{"127.0.0.8", "127.0.0.9", "127.0.0.10"}, 1)
	defer pool.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()

	for name, path := range suitePaths("/destination-endpoint-served-test") {
		t.Run(name, func(t *testing.T) {
			for _, pod := range pool.pods {
				res, err := send(client, pool.envoy.URL, path, pod.ip)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, res.status)
				require.Equal(t, pod.name, res.echo.Pod)
				require.Equal(t, pod.ids[0], res.served)
			}
		})
	}

	t.Run("a fallback served", func(t *testing.T) {
		// The first pod of the selection stops answering: its echo server
		// closes, so the connection is refused and envoysim retries.
		first, second := pool.pods[0], pool.pods[1]
		require.NoError(t, pool.servers[0].Close())
		for name, path := range suitePaths("/destination-endpoint-served-test") {
			t.Run(name, func(t *testing.T) {
				for range 5 {
					res, err := send(client, pool.envoy.URL, path, first.ip+","+second.ip)
					require.NoError(t, err)
					require.Equal(t, second.name, res.echo.Pod)
					require.Equal(t, second.ids[0], res.served, "the header names the endpoint that served")
				}
			})
		}
	})
}

// EppUnAvailableFailOpen: the suite pins a pod while the picker is up, then
// makes the picker's Service unavailable and checks that requests still
// succeed, served by any pod of the pool (the gateway's ext_proc filter
// fails open). Here the picker's gRPC server stops and envoysim, configured
// to fail open as the suite's gateways are, forwards without it.
func TestEppUnAvailableFailOpen(t *testing.T) {
	defer leakcheck.Check(t)()
	pool := newSuitePool(t, "secondary-inference-model-server", []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}, 1)
	defer pool.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	target := pool.pods[0]

	t.Run("Phase 1: Verify baseline connectivity with EPP available", func(t *testing.T) {
		res, err := send(client, pool.envoy.URL, "/failopen-pool-test", target.ip)
		require.NoError(t, err)
		require.Equal(t, target.name, res.echo.Pod)
		require.Equal(t, target.ids[0], res.served, "the picker answered")
	})
	t.Run("Phase 2: Verify fail-open behavior after EPP becomes unavailable", func(t *testing.T) {
		pool.stopPicker()
		for range 6 {
			res, err := send(client, pool.envoy.URL, "/failopen-pool-test", target.ip)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(res.echo.Pod, "secondary-inference-model-server"), res.echo.Pod)
			require.Empty(t, res.served, "no picker saw the response")
		}
	})
}

// GatewayWeightedAcrossTwoInferencePools: one route splits traffic 70/30
// across two pools, each with its own picker; every request carries a
// selection naming the pods of both pools, and the suite checks that every
// request is served by a pod of one of the pools and that the split is
// within ten points (or three sigmas) of 70/30. The split is the gateway's;
// what it asks of a picker is to keep to its own pool's endpoints when the
// selection names others. Here a weighted splitter stands for the route's
// weighted backendRefs (in a fixed 7:3 order, so the counts are exact), and
// each request must be served by a pod of the pool it was sent to.
func TestGatewayWeightedAcrossTwoInferencePools(t *testing.T) {
	defer leakcheck.Check(t)()
	primary := newSuitePool(t, "primary-inference-model-server", []string{"127.0.0.14", "127.0.0.15", "127.0.0.16"}, 1)
	defer primary.close()
	secondary := newSuitePool(t, "secondary-inference-model-server", []string{"127.0.0.17", "127.0.0.18", "127.0.0.19"}, 1)
	defer secondary.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()

	var ips []string
	for _, p := range append(slices.Clone(primary.pods), secondary.pods...) {
		ips = append(ips, p.ip)
	}
	selection := strings.Join(ips, ",")
	for name, path := range suitePaths("/weighted-two-pools-test") {
		t.Run(name, func(t *testing.T) {
			var turn atomic.Int64
			var primaryHits, secondaryHits atomic.Int64
			sendTo := func() (*suitePool, suiteResult, error) {
				pool := secondary
				if turn.Add(1)%10 < 7 { // 70:30
					pool = primary
				}
				res, err := send(client, pool.envoy.URL, path, selection)
				return pool, res, err
			}
			// The suite's warm-up request.
			_, _, err := sendTo()
			require.NoError(t, err)
			turn.Store(0)
			for range 200 {
				pool, res, err := sendTo()
				require.NoError(t, err)
				require.NotNil(t, pool.pod(res.echo.Pod), "a request for the pool of %s was handled by pod %q outside it", pool.pods[0].name, res.echo.Pod)
				if pool == primary {
					primaryHits.Add(1)
				} else {
					secondaryHits.Add(1)
				}
			}
			require.EqualValues(t, 140, primaryHits.Load())
			require.EqualValues(t, 60, secondaryHits.Load())
		})
	}
}
