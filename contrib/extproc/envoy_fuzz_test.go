package extproc

import (
	"net/http"
	"net/textproto"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// FuzzEnvoyHeadersAndMetadata feeds arbitrary request headers (Envoy
// forwards the client's) and subset-hint and served-endpoint metadata to
// the picker's readers (seed corpus in
// testdata/fuzz/FuzzEnvoyHeadersAndMetadata): it never panics; the header
// map holds exactly the non-pseudo headers under their canonical keys, a
// raw value preferred to a value, and :path without its query; appending to
// one header's values changes no other header (they share one array); and
// the hint and the served endpoint hold only trimmed, non-empty addresses.
func FuzzEnvoyHeadersAndMetadata(f *testing.F) {
	f.Add(":path\x00/v1/completions?x=1\nx-session-id\x00abc\nX-Session-Id\x00def\n:authority\x00gw\ncontent-type\x00application/json", uint8(0),
		"10.0.0.1:8000, 10.0.0.2:8000,,")
	f.Add("a\x00\nA\x00x\nb\x00y\n:path\x00\n:path\x00/second", uint8(5), " , ")
	f.Add("cookie\x00llm-d-session=x\ncookie\x00b=c\nx\x00\xff", uint8(2), "10.0.0.1:8000\n\n 10.0.0.3:9000 ")
	f.Fuzz(func(t *testing.T, headers string, raw uint8, hint string) {
		var hvs []*corev3.HeaderValue
		ref := http.Header{}
		wantPath := ""
		for i, line := range strings.Split(headers, "\n") {
			k, v, _ := strings.Cut(line, "\x00")
			hv := &corev3.HeaderValue{Key: k}
			if raw>>(i%8)&1 == 1 || v == "" {
				hv.RawValue = []byte(v)
			} else {
				hv.Value = v
			}
			hvs = append(hvs, hv)
			switch {
			case k == ":path":
				wantPath, _, _ = strings.Cut(v, "?")
			case !strings.HasPrefix(k, ":"):
				ck := textproto.CanonicalMIMEHeaderKey(k)
				ref[ck] = append(ref[ck], v)
			}
		}
		h, path, _ := headersOf(&corev3.HeaderMap{Headers: hvs})
		if path != wantPath || !reflect.DeepEqual(h, ref) {
			t.Fatalf("headers %q: got %q and path %q, want %q and %q", headers, h, path, ref, wantPath)
		}
		for k := range h {
			h[k] = append(h[k], "appended")
			ref[k] = append(slices.Clone(ref[k]), "appended")
			if !reflect.DeepEqual(h, ref) {
				t.Fatalf("appending to %q changed another header: %q, want %q", k, h, ref)
			}
		}

		const ns, key = "envoy.lb", "x-gateway-destination-endpoint-subset"
		var list []*structpb.Value
		for _, s := range strings.Split(hint, "\n") {
			list = append(list, structpb.NewStringValue(s))
		}
		for _, v := range []*structpb.Value{structpb.NewStringValue(hint), structpb.NewListValue(&structpb.ListValue{Values: list})} {
			md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{ns: {Fields: map[string]*structpb.Value{key: v}}}}
			ids, ok, bad := subsetHint(md, ns, key)
			if !ok || bad != "" {
				t.Fatalf("a present hint of strings read as absent (%v) or malformed (%q)", !ok, bad)
			}
			for _, id := range ids {
				if id == "" || id != strings.TrimSpace(id) {
					t.Fatalf("hint %q gave %q", hint, ids)
				}
			}
			if served, ok, _ := servedEndpoint(md, ns, key); ok != (served != "") || served != strings.TrimSpace(served) {
				t.Fatalf("served endpoint %q, %v from %q", served, ok, hint)
			}
		}
		if _, ok, _ := subsetHint(&corev3.Metadata{}, ns, key); ok {
			t.Fatal("an absent hint read as present")
		}
	})
}
