package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/kvroute/kvroute/simengine"
)

// Engine roles in prefill/decode disaggregation (PDConfig.Role). They match
// the role names kvroute's endpoints carry.
const (
	RoleBoth    = "both"
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// KV-load failure policies (PDConfig.KVLoadFailurePolicy), vLLM's
// kv_load_failure_policy values.
const (
	PolicyRecompute = "recompute"
	PolicyFail      = "fail"
)

// KVTransferReadPath is the route a decode engine reads a prefill engine's
// blocks from. It stands for the KV connector's side channel and data path
// (NIXL's handshake and RDMA read on vLLM): the simulated prefiller's
// kv_transfer_params name its HTTP host and port as remote_host and
// remote_port, where vLLM names the side channel's.
const KVTransferReadPath = "/kv_transfer/read"

// Defaults of PDConfig.
const (
	DefaultTransferTimePerToken = 5 * time.Microsecond
	DefaultTransferTimeout      = 10 * time.Second
	DefaultLeaseTTL             = 480 * time.Second
	DefaultMaxLeases            = 4096
)

// PDConfig is the engine's part in P/D disaggregation. The zero value is an
// ordinary engine (role both), which ignores kv_transfer_params.
type PDConfig struct {
	// Role is "" or "both" (no KV connector: kv_transfer_params are
	// ignored), "prefill" (a request with do_remote_decode is answered with
	// kv_transfer_params pointing at this engine, which holds its blocks,
	// in use, until a decoder reads them or LeaseTTL passes) or "decode" (a
	// request with do_remote_prefill reads the named prefiller's blocks
	// first).
	Role string `json:"role"`
	// EngineID is the remote_engine_id a prefiller reports (default: random).
	EngineID string `json:"engineID"`
	// AdvertiseHost is the remote_host a prefiller reports (default: the
	// host it listens on).
	AdvertiseHost string `json:"advertiseHost"`
	// TransferTimePerToken is the simulated read time per transferred prompt
	// token on a decoder, scaled by the engine's TimeScale (default 5µs: an
	// 8B model's 128 KiB of KV per token over some 25 GB/s). Negative means 0.
	TransferTimePerToken time.Duration `json:"transferTimePerToken"`
	// TransferTimeout bounds a decoder's read request (default 10s).
	TransferTimeout time.Duration `json:"transferTimeout"`
	// LeaseTTL is how long a prefiller keeps a finished request's blocks
	// readable (default 480s, vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT).
	LeaseTTL time.Duration `json:"leaseTTL"`
	// MaxLeases bounds the readable requests a prefiller tracks; the oldest
	// is dropped (and counted) past it. Default 4096.
	MaxLeases int `json:"maxLeases"`
	// KVLoadFailurePolicy is what a decoder does when a read fails or
	// returns fewer blocks: "recompute" (default) computes the missing
	// tokens locally, "fail" fails the request with a 500.
	KVLoadFailurePolicy string `json:"kvLoadFailurePolicy"`
}

func (c PDConfig) withDefaults() (PDConfig, error) {
	if c.Role == "" {
		c.Role = RoleBoth
	}
	if c.EngineID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.EngineID = "sim-" + hex.EncodeToString(b[:])
	}
	if c.TransferTimePerToken == 0 {
		c.TransferTimePerToken = DefaultTransferTimePerToken
	}
	if c.TransferTimePerToken < 0 {
		c.TransferTimePerToken = 0
	}
	if c.TransferTimeout == 0 {
		c.TransferTimeout = DefaultTransferTimeout
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.MaxLeases == 0 {
		c.MaxLeases = DefaultMaxLeases
	}
	if c.KVLoadFailurePolicy == "" {
		c.KVLoadFailurePolicy = PolicyRecompute
	}
	switch {
	case c.Role != RoleBoth && c.Role != RolePrefill && c.Role != RoleDecode:
		return c, fmt.Errorf("simengine: pd role %q is not both, prefill or decode", c.Role)
	case c.KVLoadFailurePolicy != PolicyRecompute && c.KVLoadFailurePolicy != PolicyFail:
		return c, fmt.Errorf("simengine: kvLoadFailurePolicy %q is not recompute or fail", c.KVLoadFailurePolicy)
	case c.TransferTimeout < 0:
		return c, fmt.Errorf("simengine: pd transferTimeout %v is negative", c.TransferTimeout)
	case c.LeaseTTL < 0:
		return c, fmt.Errorf("simengine: pd leaseTTL %v is negative", c.LeaseTTL)
	case c.MaxLeases < 0:
		return c, fmt.Errorf("simengine: pd maxLeases %d is negative", c.MaxLeases)
	}
	return c, nil
}

// kvTransferParams are the request and response fields of vLLM's NIXL
// connector that the simulation uses. remote_block_ids carries the blocks'
// 64-bit hashes (vLLM: the prefiller's physical block numbers); a decoder
// treats them as opaque.
type kvTransferParams struct {
	DoRemoteDecode  bool     `json:"do_remote_decode"`
	DoRemotePrefill bool     `json:"do_remote_prefill"`
	RemoteEngineID  string   `json:"remote_engine_id"`
	RemoteBlockIDs  []uint64 `json:"remote_block_ids"`
	RemoteRequestID string   `json:"remote_request_id"`
	RemoteHost      string   `json:"remote_host"`
	RemotePort      int      `json:"remote_port"`
	TPSize          int      `json:"tp_size"`
}

// pdRequest is what the P/D layer decided for one HTTP request.
type pdRequest struct {
	produce bool // prefill role, do_remote_decode: answer with transfer params
	remote  int  // decode role: prompt tokens received by transfer
}

// pdBegin interprets a request's kv_transfer_params for this engine's role.
// On a decoder asked for a remote prefill it runs the read (and its
// simulated duration) and returns how many prompt tokens arrived; a failed
// read is counted and, under the recompute policy, leaves the rest to local
// compute.
func (s *Server) pdBegin(ctx context.Context, raw json.RawMessage, prompts [][]uint32) (*pdRequest, *apiError) {
	if isNull(raw) || s.pd.cfg.Role == RoleBoth {
		return &pdRequest{}, nil
	}
	var p kvTransferParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, withParam(badRequest("kv_transfer_params: %v", err), "kv_transfer_params")
	}
	switch {
	case s.pd.cfg.Role == RolePrefill && p.DoRemoteDecode:
		// Free the blocks of leases past their TTL before this request
		// needs room (expiry is lazy: no timer goroutine).
		s.pd.leases.sweep()
		if len(prompts) != 1 {
			return nil, withParam(badRequest("kv_transfer_params needs exactly one prompt"), "kv_transfer_params")
		}
		return &pdRequest{produce: true}, nil
	case s.pd.cfg.Role == RoleDecode && p.DoRemotePrefill:
		if len(prompts) != 1 {
			return nil, withParam(badRequest("kv_transfer_params needs exactly one prompt"), "kv_transfer_params")
		}
		return s.pdRead(ctx, p, len(prompts[0]))
	}
	return &pdRequest{}, nil
}

// pdRead reads the blocks a prefiller holds for p and waits the transfer time.
func (s *Server) pdRead(ctx context.Context, p kvTransferParams, promptLen int) (*pdRequest, *apiError) {
	// Until it is submitted the request waits for its KV, counted among
	// the engine's waiting requests as vLLM counts WAITING_FOR_REMOTE_KVS.
	// The engine request is submitted right after this returns.
	done := s.eng.Defer()
	defer done()
	tokens, reason, err := s.pdFetch(ctx, p)
	if err != nil || tokens < promptLen {
		if reason == "" {
			reason = failEvicted
		}
		s.pd.failures.WithLabelValues(reason).Inc()
		s.lg.Warn("KV transfer failed", "reason", reason, "err", err, "got", tokens, "prompt", promptLen, "policy", s.pd.cfg.KVLoadFailurePolicy)
		if ctx.Err() != nil {
			return nil, &apiError{status: http.StatusServiceUnavailable, typ: typeUnavail, message: "client gone"}
		}
		if s.pd.cfg.KVLoadFailurePolicy == PolicyFail {
			s.pd.transfers.WithLabelValues("fail").Inc()
			return nil, &apiError{status: http.StatusInternalServerError, typ: typeInternal,
				message: fmt.Sprintf("KV transfer from %s failed (%s) and kv_load_failure_policy is fail", p.RemoteEngineID, reason)}
		}
		s.pd.transfers.WithLabelValues("recompute").Inc()
	} else {
		s.pd.transfers.WithLabelValues("ok").Inc()
	}
	if tokens > 0 {
		t := time.NewTimer(transferTime(tokens, s.pd.cfg.TransferTimePerToken, s.eng.Config().TimeScale))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, &apiError{status: http.StatusServiceUnavailable, typ: typeUnavail, message: "client gone"}
		}
		s.pd.received.Add(float64(tokens))
	}
	return &pdRequest{remote: tokens}, nil
}

// transferTime is how long a decoder waits for tokens read at perToken,
// scaled by the engine's TimeScale: the longest Duration when the product
// is past int64's range, whose conversion would give an arbitrary value
// (negative on amd64: no wait at all).
func transferTime(tokens int, perToken time.Duration, scale float64) time.Duration {
	ns := float64(tokens) * float64(perToken) * scale
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// Transfer failure reasons (label values of
// simengine_kv_transfer_failures_total).
const (
	failUnreachable = "unreachable" // no answer from the prefiller
	failExpired     = "expired"     // the prefiller no longer knows the request
	failEvicted     = "evicted"     // some or all of its blocks were evicted
	failBadParams   = "bad_params"  // kv_transfer_params unusable, or a malformed answer
)

// pdFetch does the read request; it returns the prompt tokens received.
func (s *Server) pdFetch(ctx context.Context, p kvTransferParams) (int, string, error) {
	if p.RemoteHost == "" || p.RemotePort <= 0 || p.RemotePort > 65535 || p.RemoteRequestID == "" {
		return 0, failBadParams, errors.New("kv_transfer_params lacks remote_host, remote_port or remote_request_id")
	}
	body, err := json.Marshal(readRequest{RequestID: p.RemoteRequestID, EngineID: p.RemoteEngineID, BlockIDs: p.RemoteBlockIDs})
	if err != nil {
		return 0, failBadParams, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.pd.cfg.TransferTimeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(p.RemoteHost, strconv.Itoa(p.RemotePort)) + KVTransferReadPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, failBadParams, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.pd.client.Do(req)
	if err != nil {
		return 0, failUnreachable, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return 0, failUnreachable, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return 0, failExpired, fmt.Errorf("prefiller: %s", b)
	default:
		return 0, failBadParams, fmt.Errorf("prefiller answered %d: %s", resp.StatusCode, b)
	}
	var rr readResponse
	if err := json.Unmarshal(b, &rr); err != nil || rr.Tokens < 0 {
		return 0, failBadParams, fmt.Errorf("malformed read answer %q", b)
	}
	return rr.Tokens, "", nil
}

// readRequest and readResponse are the bodies of KVTransferReadPath.
type readRequest struct {
	RequestID string   `json:"remote_request_id"`
	EngineID  string   `json:"remote_engine_id"`
	BlockIDs  []uint64 `json:"remote_block_ids"`
}

type readResponse struct {
	// Tokens is how many leading prompt tokens' KV was read: the whole
	// prompt (the partial last block travels with the full ones) when
	// every block is still held, else the held full blocks' tokens.
	Tokens int `json:"tokens"`
	Blocks int `json:"blocks"`
}

// pdFinish is called on a prefiller after a do_remote_decode request
// finished: it registers the lease and returns the kv_transfer_params to
// answer (nil when the request does not produce).
func (s *Server) pdFinish(pd *pdRequest, id string, engID simengine.ReqID, req simengine.Request) *kvTransferParams {
	if pd == nil || !pd.produce {
		return nil
	}
	blocks := s.eng.CachedBlocks(req)
	// The request's engine id, as vLLM's: the response's id and eight
	// random hex digits, unique although clients' X-Request-Ids may not be.
	id += "-" + uuid4Hex()[:8]
	s.pd.leases.add(id, lease{req: req, engID: engID, blocks: blocks})
	host, port := s.pdAdvertise()
	return &kvTransferParams{DoRemotePrefill: true, RemoteEngineID: s.pd.cfg.EngineID, RemoteBlockIDs: blocks,
		RemoteRequestID: id, RemoteHost: host, RemotePort: port, TPSize: 1}
}

func (s *Server) pdAdvertise() (string, int) {
	host, port, _ := net.SplitHostPort(s.Addr())
	if s.pd.cfg.AdvertiseHost != "" {
		host = s.pd.cfg.AdvertiseHost
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// handleKVRead serves KVTransferReadPath on a prefiller: the lease is
// consumed, and the answer says how much of the prompt is still held.
func (s *Server) handleKVRead(w http.ResponseWriter, r *http.Request) {
	var rr readRequest
	if e := s.decodeJSON(w, r, &rr); e != nil {
		writeAPIError(w, e)
		return
	}
	if rr.EngineID != "" && rr.EngineID != s.pd.cfg.EngineID {
		writeDetail(w, http.StatusNotFound, "unknown remote_engine_id "+strconv.Quote(rr.EngineID))
		return
	}
	l, ok := s.pd.leases.take(rr.RequestID)
	if !ok {
		writeDetail(w, http.StatusNotFound, "no readable blocks for remote_request_id "+strconv.Quote(rr.RequestID)+" (expired, already read or unknown)")
		return
	}
	held := s.eng.CachedBlocks(l.req)
	s.eng.ReleaseKV(l.engID) // read: the prefiller frees them (they stay cached)
	n := 0
	for n < len(held) && n < len(l.blocks) && held[n] == l.blocks[n] {
		n++
	}
	tokens := n * s.eng.BlockSize()
	if n == len(l.blocks) {
		tokens = len(l.req.Prompt)
	}
	writeJSON(w, http.StatusOK, readResponse{Tokens: tokens, Blocks: n})
}

// pdEngineRequest is the engine request a prefill computed, for its lease.
func (s *Server) pdEngineRequest(prompt []uint32, salt *string, lora string) simengine.Request {
	r := simengine.Request{Prompt: prompt, LoRAName: lora}
	if salt != nil {
		r.CacheSalt = *salt
	}
	return r
}
