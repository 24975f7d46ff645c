package usage

import (
	"bytes"
	"encoding/json"

	"github.com/kvroute/kvroute/internal/bytebudget"
)

// MaxBytes bounds what a Scanner keeps of a response to find its usage: a
// whole JSON body, or one SSE line. A larger body or line is passed over
// unread (result TooLarge).
const MaxBytes = 1 << 20

// Results of a Scanner, the values of the hosts' result label.
const (
	Observed = "observed"  // cached tokens read
	Absent   = "no_usage"  // the response carried no usage (a stream without stream_options.include_usage)
	TooLarge = "too_large" // the body or an SSE line exceeded MaxBytes
	Invalid  = "invalid"   // the usage could not be decoded
	NoRoom   = "no_room"   // the byte budget had no room for the buffer the response needed
)

// Results lists every result a Scanner returns, for a host's metric to
// create its label values up front.
var Results = []string{Observed, Absent, TooLarge, Invalid, NoRoom}

// usageJSON is the usage object of the four APIs as vLLM writes them:
// OpenAI's prompt_tokens_details.cached_tokens (completions, chat), the
// Responses API's input_tokens_details.cached_tokens and Anthropic's
// cache_read_input_tokens. vLLM writes the details only when started with
// --enable-prompt-tokens-details, and (in most versions) only when the count
// is not 0, so a usage without them reads as 0 cached tokens.
type usageJSON struct {
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	CacheReadInputTokens *int `json:"cache_read_input_tokens"`
}

func (u *usageJSON) cached() int {
	switch {
	case u.PromptTokensDetails != nil:
		return u.PromptTokensDetails.CachedTokens
	case u.InputTokensDetails != nil:
		return u.InputTokensDetails.CachedTokens
	case u.CacheReadInputTokens != nil:
		return *u.CacheReadInputTokens
	}
	return 0
}

// usageEnvelope finds the usage at the top level (JSON bodies, OpenAI stream
// chunks) or in the Responses API's response.completed event.
type usageEnvelope struct {
	Usage    *usageJSON `json:"usage"`
	Response *struct {
		Usage *usageJSON `json:"usage"`
	} `json:"response"`
}

// Scanner reads a response's engine-reported cached tokens as the bytes go
// by: the whole JSON body, or every SSE data line (the last usage wins: vLLM
// sends it in the final chunk of a stream that asked for
// stream_options.include_usage). Its zero value reads a JSON body with no
// budget. A Scanner is not safe for concurrent use; one goroutine, the one
// copying the response, owns it.
type Scanner struct {
	// SSE reads the response as a server-sent event stream (Content-Type
	// text/event-stream) rather than one JSON body. Set it before the first
	// Write.
	SSE bool
	// Budget, when set, is charged the capacity of the Scanner's buffer as
	// it grows, and given it back by Result or Release. Set it before the
	// first Write.
	Budget *bytebudget.Budget

	buf     []byte
	held    int64 // the bytes of Budget that buf's capacity holds
	over    bool  // the body (JSON) or the current line (SSE) exceeded the cap
	invalid bool
	skipped bool // some SSE line was too long to read
	noRoom  bool // the budget refused the buffer: nothing more is read
	found   bool
	cached  int
}

// Write reads the next bytes of the response.
func (u *Scanner) Write(p []byte) {
	if u.noRoom {
		return
	}
	if !u.SSE {
		if u.over {
			return
		}
		if len(u.buf)+len(p) > MaxBytes {
			u.over = true
			u.drop()
			return
		}
		u.append(p)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			u.appendLine(p)
			return
		}
		u.appendLine(p[:i])
		if u.noRoom {
			return
		}
		if !u.over {
			u.line(u.buf)
		}
		u.buf, u.over = u.buf[:0], false
		p = p[i+1:]
	}
}

func (u *Scanner) appendLine(p []byte) {
	if u.over {
		return
	}
	if len(u.buf)+len(p) > MaxBytes {
		u.over, u.skipped, u.buf = true, true, u.buf[:0]
		return
	}
	u.append(p)
}

// append adds p to the buffer, growing it within the budget (doubling, at
// most to MaxBytes); when the budget has no room the buffer is dropped and
// the Scanner reads nothing more.
func (u *Scanner) append(p []byte) {
	need := len(u.buf) + len(p)
	if need > cap(u.buf) {
		next := min(max(2*cap(u.buf), need, 512), MaxBytes)
		if u.Budget == nil {
			grown := make([]byte, len(u.buf), next)
			copy(grown, u.buf)
			u.buf = grown
		} else {
			grown, taken, ok := u.Budget.Grow(u.buf, next)
			if !ok {
				u.noRoom = true
				u.drop()
				return
			}
			u.buf, u.held = grown, u.held+taken
		}
	}
	u.buf = append(u.buf, p...)
}

// drop lets the buffer go and gives its bytes back to the budget.
func (u *Scanner) drop() {
	u.buf = nil
	if u.Budget != nil {
		u.Budget.Release(u.held)
	}
	u.held = 0
}

// Release gives the Scanner's buffer back to its budget without a result,
// for a response that ended early. It is safe to call more than once, and
// after Result.
func (u *Scanner) Release() { u.drop() }

// Held returns the bytes of the budget the Scanner holds now.
func (u *Scanner) Held() int64 { return u.held }

// line handles one complete SSE line.
func (u *Scanner) line(l []byte) {
	l = bytes.TrimRight(l, "\r")
	data, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return // most chunks: no need to decode
	}
	u.decode(data)
}

func (u *Scanner) decode(b []byte) {
	var env usageEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		u.invalid = true
		return
	}
	us := env.Usage
	if us == nil && env.Response != nil {
		us = env.Response.Usage
	}
	if us != nil {
		u.found, u.cached = true, us.cached()
	}
}

// Result returns the cached tokens the response reported, and the result:
// Observed when it reported them (0 counts: vLLM leaves the details out
// when it reused nothing), else why not. Call it once the response ended; it
// releases the buffer.
func (u *Scanner) Result() (cached int, result string) {
	defer u.drop()
	switch {
	case u.noRoom:
		return 0, NoRoom
	case !u.SSE:
		if u.over {
			return 0, TooLarge
		}
		u.decode(u.buf)
	case len(u.buf) > 0 && !u.over:
		u.line(u.buf) // a last line without newline
	}
	switch {
	case u.found:
		return u.cached, Observed
	case u.invalid:
		return 0, Invalid
	case u.skipped:
		return 0, TooLarge
	}
	return 0, Absent
}
