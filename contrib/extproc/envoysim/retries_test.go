package envoysim_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A negative Retries tries the first endpoint only, as 0 does, instead of
// failing the request.
func TestNegativeRetriesTriesTheFirstEndpoint(t *testing.T) {
	defer leakcheck.Check(t)()
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer engine.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, &removingPicker{dest: engine.Listener.Addr().String()})
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(ln) }()
	defer func() { g.Stop(); <-served }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	proxy := httptest.NewServer(envoysim.New(envoysim.Config{Retries: -1}, extprocv3.NewExternalProcessorClient(conn), client))
	defer proxy.Close()

	resp, err := client.Get(proxy.URL + "/v1/models")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "ok", string(body))
}
