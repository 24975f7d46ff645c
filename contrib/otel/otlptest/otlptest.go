package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// MaxBodyBytes bounds one OTLP/HTTP request body (after decompression);
// larger requests get 413.
const MaxBodyBytes = 16 << 20

// Span is one received span, flattened.
type Span struct {
	Name         string
	TraceID      string // hex
	SpanID       string // hex
	ParentSpanID string // hex; empty for a root span
	Service      string // the resource's service.name
	Attributes   map[string]string
}

// Receiver keeps the spans of every export request it accepted.
//
// Ownership: NewGRPC starts a goroutine that runs the gRPC server until
// Close stops it and waits for its handlers (see handlers); NewHTTP's
// httptest server runs its own until Close, which waits for its requests.
// The export handlers run on the servers' goroutines, possibly concurrently,
// and write spans and requests (and, over HTTP, rejected) under mu, which
// the accessors take to read them. Endpoint and closeFn are set by the
// constructor and not written after.
type Receiver struct {
	// Endpoint is what OTEL_EXPORTER_OTLP_ENDPOINT should name:
	// http://127.0.0.1:port for either protocol.
	Endpoint string

	mu       sync.Mutex
	spans    []Span
	requests int
	rejected int
	closeFn  func()
}

// add records the spans of one export request.
func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{Name: sp.GetName(), TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					Service: svc, Attributes: map[string]string{}}
				if p := sp.GetParentSpanId(); len(p) > 0 {
					s.ParentSpanID = hex.EncodeToString(p)
				}
				for _, kv := range sp.GetAttributes() {
					s.Attributes[kv.GetKey()] = anyString(kv.GetValue())
				}
				out = append(out, s)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, out...)
	r.requests++
	r.mu.Unlock()
}

// anyString renders an attribute's value as text: a string as itself, a
// number or boolean as Go formats it, anything else (arrays, maps, bytes)
// as its protobuf text.
func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	default:
		return fmt.Sprint(v)
	}
}

// Spans returns a copy of the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests returns the number of export requests accepted, and of those
// rejected as malformed.
func (r *Receiver) Requests() (accepted, rejected int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.rejected
}

// Close stops the server and waits for its goroutines, export handlers
// included: no span is added once it has returned.
func (r *Receiver) Close() { r.closeFn() }

// traceService is the collector's gRPC TraceService.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r    *Receiver
	hook func(context.Context) // tests: runs at the start of every export
}

func (s traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if s.hook != nil {
		s.hook(ctx)
	}
	s.r.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// handlers tracks the gRPC handlers running, so that Close can wait for
// them: grpc.Server.Stop closes the connections and cancels the handlers'
// contexts but returns without waiting for the handlers to return. Once
// closed, a handler that had not started yet is refused.
type handlers struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// intercept is the server's unary interceptor: it counts the handler in
// while it runs.
func (h *handlers) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "otlptest: the receiver is closed")
	}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	return next(ctx, req)
}

// wait refuses further handlers and waits for the running ones to return.
func (h *handlers) wait() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.wg.Wait()
}

// NewGRPC starts a gRPC OTLP receiver on a free loopback port.
func NewGRPC() (*Receiver, error) { return newGRPC(nil) }

// newGRPC is NewGRPC with a hook run at the start of every export.
func newGRPC(hook func(context.Context)) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{Endpoint: "http://" + ln.Addr().String()}
	var hs handlers
	gs := grpc.NewServer(grpc.UnaryInterceptor(hs.intercept))
	coltracepb.RegisterTraceServiceServer(gs, traceService{r: r, hook: hook})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(ln)
	}()
	r.closeFn = func() {
		gs.Stop()
		<-done
		hs.wait()
	}
	return r, nil
}

// NewHTTP starts an OTLP/HTTP receiver (binary protobuf, optionally
// gzip-compressed) on a free loopback port, serving POST /v1/traces.
func NewHTTP() *Receiver {
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	srv := httptest.NewServer(mux)
	r.Endpoint = srv.URL
	r.closeFn = srv.Close
	return r
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.reject(w, http.StatusUnsupportedMediaType, "content type "+ct)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.reject(w, http.StatusBadRequest, err.Error())
			return
		}
		defer zr.Close()
		body = zr
	}
	data, err := io.ReadAll(io.LimitReader(body, MaxBodyBytes+1))
	if err != nil {
		r.reject(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(data) > MaxBodyBytes {
		r.reject(w, http.StatusRequestEntityTooLarge, "body too large")
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		r.reject(w, http.StatusBadRequest, err.Error())
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) reject(w http.ResponseWriter, code int, msg string) {
	r.mu.Lock()
	r.rejected++
	r.mu.Unlock()
	http.Error(w, msg, code)
}
