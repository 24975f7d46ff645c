package envoysim_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// removingPicker names dest for every request and asks Envoy to remove the
// request header reqRemove and the response header respRemove, as a picker
// removes a client's own sidecar headers.
type removingPicker struct {
	extprocv3.UnimplementedExternalProcessorServer
	dest, reqRemove, respRemove string
}

func (p *removingPicker) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var resp *extprocv3.ProcessingResponse
		switch req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
				Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
					SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{
						Key: "x-gateway-destination-endpoint", RawValue: []byte(p.dest)}}},
					RemoveHeaders: []string{p.reqRemove},
				}},
			}}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{
				Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{p.respRemove}}},
			}}}
		case *extprocv3.ProcessingRequest_ResponseBody:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
				Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
					StreamedResponse: &extprocv3.StreamedBodyResponse{Body: req.GetResponseBody().GetBody(), EndOfStream: req.GetResponseBody().GetEndOfStream()},
				}}},
			}}}
		default:
			continue
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// The proxy applies the picker's remove_headers as Envoy's ext_proc filter
// does: a request header the picker removes (a client's own
// x-prefiller-host-port) does not reach the upstream, and a response header
// it removes does not reach the client.
func TestRemoveHeadersAreApplied(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after startProxy's cleanup
	got := make(chan http.Header, 1)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("X-Engine-Internal", "secret")
		_, _ = io.WriteString(w, "ok")
	}))
	defer engine.Close()

	proxy := startProxy(t, envoysim.Config{}, &removingPicker{
		dest: engine.Listener.Addr().String(), reqRemove: "x-prefiller-host-port", respRemove: "x-engine-internal"})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	req, err := http.NewRequest(http.MethodGet, proxy.URL+"/v1/models", nil)
	require.NoError(t, err)
	req.Header.Set("X-Prefiller-Host-Port", "203.0.113.9:8000")
	req.Header.Set("X-Kept", "yes")
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "ok", string(body))
	h := <-got
	require.Empty(t, h.Values("X-Prefiller-Host-Port"), "the removed request header reached the upstream")
	require.Equal(t, "yes", h.Get("X-Kept"))
	require.Empty(t, resp.Header.Values("X-Engine-Internal"), "the removed response header reached the client")
}

// startProxy serves picker over a real gRPC ext_proc stream on loopback and
// returns an envoysim proxy in front of it with cfg; the test's cleanup
// stops both (a leak check registered with t.Cleanup before it runs after).
func startProxy(t *testing.T, cfg envoysim.Config, picker extprocv3.ExternalProcessorServer) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, picker)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	upstream := &http.Client{Transport: &http.Transport{}}
	proxy := httptest.NewServer(envoysim.New(cfg, extprocv3.NewExternalProcessorClient(conn), upstream))
	t.Cleanup(func() {
		proxy.Close()
		upstream.CloseIdleConnections()
		_ = conn.Close()
		g.Stop()
		<-served
	})
	return proxy
}
