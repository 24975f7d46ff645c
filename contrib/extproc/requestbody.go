package extproc

import (
	"errors"
	"fmt"
	"net/http"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/jsonscan"
)

// refuseBodyMode answers a request with a body that Envoy does not send
// FULL_DUPLEX_STREAMED. In any other mode Envoy waits for the request
// headers' answer before it sends the body (NONE: never sends it), and the
// picker answers the headers only once the body ended: waiting would hold
// the request until Envoy's message_timeout, for the same misconfiguration
// on every request. It is answered at once, 500 naming the mode needed, and
// logged once per picker.
func (st *streamState) refuseBodyMode() error {
	st.setResult(resultBodyMode)
	msg := fmt.Sprintf("the endpoint picker needs the request body FULL_DUPLEX_STREAMED (Envoy's ext_proc processing_mode.request_body_mode); Envoy sends it %s", st.reqMode)
	if st.srv.bodyModeLogged.CompareAndSwap(false, true) {
		st.srv.log.Error("extproc: Envoy's ext_proc filter does not stream the request body full duplex; requests with a body are answered 500",
			"request_body_mode", st.reqMode.String(), "needed", filterv3.ProcessingMode_FULL_DUPLEX_STREAMED.String())
	}
	return st.immediate(http.StatusInternalServerError, msg)
}

// refuseBodyBudget answers a stream whose body, or the picker's copy of it,
// found no room in Config.MaxBodyBytesInFlight.
func (st *streamState) refuseBodyBudget() error {
	st.setResult(resultBodyBudget)
	return st.immediate(http.StatusServiceUnavailable, fmt.Sprintf(
		"the endpoint picker is holding its limit of %d bytes of request bodies in flight; retry later",
		st.srv.cfg.MaxBodyBytesInFlight), header("retry-after", "1"))
}

// jsonBody returns body as vLLM reads it (jsonscan.PythonJSON): FastAPI
// hands the body's bytes to Python's json.loads, which decodes a UTF-16 or
// UTF-32 body and reads a UTF-8 one past a leading byte order mark. A wide
// body becomes the UTF-8 JSON the engine reads the same, the copy charged
// to the body budget before it is made, and held with the body until the
// stream lets go of it; a UTF-8 one loses its mark. The error is that of a
// refusal it has answered: 400 for a wide body that is not text in its
// encoding (the message names it), 503 for no room in the budget.
func (st *streamState) jsonBody(body []byte) ([]byte, error) {
	out, err := jsonscan.PythonJSON(body, func(n int) error {
		if !st.srv.bodies.Acquire(int64(n)) {
			return bytebudget.ErrNoRoom
		}
		st.held += int64(n)
		return nil
	})
	switch {
	case errors.Is(err, bytebudget.ErrNoRoom):
		return nil, st.refuseBodyBudget()
	case err != nil:
		st.setResult(resultBadRequest)
		return nil, st.immediate(http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
	}
	st.body = out
	return out, nil
}

// dropTransferParams returns body without its top-level kv_transfer_params
// (Config.AllowClientKVTransferParams), the copy charged to the body budget
// with the body until the stream lets go of it, or the error of a refusal
// it has answered.
func (st *streamState) dropTransferParams(body []byte) ([]byte, error) {
	out, err := sidecar.LocalBody(body)
	if err != nil { // requestMembers read it as one object: not reached
		st.setResult(resultBadRequest)
		return nil, st.immediate(http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
	}
	taken := int64(cap(out))
	if !st.srv.bodies.Acquire(taken) {
		return nil, st.refuseBodyBudget()
	}
	st.held += taken
	st.body = out
	st.srv.met.transferRemoved.Inc()
	return out, nil
}
