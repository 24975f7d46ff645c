package extproc

import (
	"fmt"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kvroute/kvroute/internal/apierror"
	"github.com/kvroute/kvroute/render"
)

// subsetHint reads the candidate list Envoy may send in the filter metadata:
// namespace → key → a list of "ip:port" (or bare "ip") strings, or a single
// comma-separated string. A list item may itself be comma-separated (a
// gateway that copies a request header into the list writes its value as
// one item), so every item is split as the single string is. ok is false
// when the key is absent, in which case every endpoint is a candidate; a
// present but empty list admits none. A value that is not a string (a list
// item, or the hint itself when it is no list either) names no endpoint:
// bad then says which, for the stream to count and to tell the client; ""
// when the hint is well formed.
func subsetHint(md *corev3.Metadata, namespace, key string) (ids []string, ok bool, bad string) {
	ns := md.GetFilterMetadata()[namespace]
	if ns == nil {
		return nil, false, ""
	}
	v, present := ns.GetFields()[key]
	if !present {
		return nil, false, ""
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_ListValue:
		for i, item := range k.ListValue.GetValues() {
			s, isString := item.GetKind().(*structpb.Value_StringValue)
			if !isString {
				if bad == "" {
					bad = fmt.Sprintf("item %d is %s, not a string", i+1, valueKind(item))
				}
				continue
			}
			ids = appendEntries(ids, s.StringValue)
		}
	case *structpb.Value_StringValue:
		ids = appendEntries(ids, k.StringValue)
	default:
		bad = "it is " + valueKind(v) + ", not a list or a string"
	}
	return ids, true, bad
}

// valueKind names a metadata value's kind, for an error message.
func valueKind(v *structpb.Value) string {
	switch v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		return "a number"
	case *structpb.Value_BoolValue:
		return "a bool"
	case *structpb.Value_StructValue:
		return "an object"
	case *structpb.Value_ListValue:
		return "a list"
	case *structpb.Value_StringValue:
		return "a string"
	default:
		return "null"
	}
}

// appendEntries appends the non-empty, trimmed entries of a comma-separated
// list to ids.
func appendEntries(ids []string, list string) []string {
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			ids = append(ids, s)
		}
	}
	return ids
}

// servedEndpoint reads the endpoint Envoy reports as having served the
// request (the first of a comma-separated list). ok is false when there is
// none. A value that is not a string names no endpoint: bad then says what
// it is, for the stream to count and log; "" when the value is well formed
// or absent.
func servedEndpoint(md *corev3.Metadata, namespace, key string) (served string, ok bool, bad string) {
	ns := md.GetFilterMetadata()[namespace]
	if ns == nil {
		return "", false, ""
	}
	v, present := ns.GetFields()[key]
	if !present {
		return "", false, ""
	}
	str, isString := v.GetKind().(*structpb.Value_StringValue)
	if !isString {
		return "", false, "it is " + valueKind(v) + ", not a string"
	}
	s, _, _ := strings.Cut(str.StringValue, ",")
	s = strings.TrimSpace(s)
	return s, s != "", ""
}

// destinationMetadata is the dynamic metadata naming the chosen endpoint:
// namespace → key → "ip:port".
func destinationMetadata(namespace, key, endpoint string) *structpb.Struct {
	inner := &structpb.Struct{Fields: map[string]*structpb.Value{key: structpb.NewStringValue(endpoint)}}
	return &structpb.Struct{Fields: map[string]*structpb.Value{namespace: structpb.NewStructValue(inner)}}
}

// headerOption is a header mutation and its header in one allocation.
type headerOption struct {
	opt corev3.HeaderValueOption
	hv  corev3.HeaderValue
}

func header(key, value string) *corev3.HeaderValueOption {
	h := &headerOption{hv: corev3.HeaderValue{Key: key, RawValue: []byte(value)}}
	h.opt.Header = &h.hv
	return &h.opt
}

// maxBodyChunk bounds each streamed body mutation the picker sends back for
// the request: some Envoy-based gateways refuse a streamed chunk above 64
// KiB (the Inference Extension's reference picker keeps under 62000 bytes
// for this), so a long prompt's body returned whole would fail there.
const maxBodyChunk = 62000

func streamedBody(body []byte, eos bool) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
		StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body, EndOfStream: eos},
	}}
}

// countTokensPath is vLLM's Anthropic token count, which Anthropic clients
// (Claude Code among them) call beside /v1/messages.
const countTokensPath = "/v1/messages/count_tokens"

// anthropicPath reports whether path, as Envoy gives it, is one of
// Anthropic's API on vLLM (Messages or its token count), whose errors are in
// Anthropic's shape.
func anthropicPath(path string) bool {
	path = decodedPath(path)
	api, _ := render.APIForPath(path)
	return api == render.APIMessages || strings.TrimRight(path, "/") == countTokensPath
}

// immediateResponse is a local reply in the error shape of the request's
// API (Anthropic's when anthropic, a Messages request; vLLM's OpenAI one
// otherwise), with extra headers besides its content type.
func immediateResponse(anthropic bool, code int, msg string, extra ...*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(code)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: append([]*corev3.HeaderValueOption{header("content-type", "application/json")}, extra...)},
			Body:    apierror.Body(anthropic, code, msg, ""),
			Details: "kvroute_" + strings.ReplaceAll(strings.ToLower(http.StatusText(code)), " ", "_"),
		},
	}}
}
