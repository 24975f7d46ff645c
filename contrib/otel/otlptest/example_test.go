package otlptest_test

import (
	"bytes"
	"fmt"
	"net/http"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kvroute/kvroute/contrib/otel/otlptest"
)

// An OTLP/HTTP export request posted to the receiver is kept span by span.
func Example() {
	r := otlptest.NewHTTP()
	defer r.Close()
	body, _ := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "pick", TraceId: make([]byte, 16), SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}}},
	}}})
	resp, err := http.Post(r.Endpoint+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, r.Spans()[0].Name, r.Spans()[0].SpanID)
	// Output: 200 pick 0102030405060708
}
