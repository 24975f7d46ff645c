package gateway

import (
	"bytes"
	"encoding/json"
)

// maxUsageBytes bounds what the gateway keeps of a response to find its
// usage: a whole JSON body, or one SSE line. A larger body or line is passed
// through unread (counted as usage result "too_large").
const maxUsageBytes = 1 << 20

// Usage results, the result label of kvroute_gateway_usage_total.
const (
	usageObserved = "observed"  // cached tokens read and handed to the Decision
	usageAbsent   = "no_usage"  // the response carried no usage (a stream without stream_options.include_usage)
	usageTooLarge = "too_large" // the body or an SSE line exceeded maxUsageBytes
	usageInvalid  = "invalid"   // the usage could not be decoded
)

var usageResults = []string{usageObserved, usageAbsent, usageTooLarge, usageInvalid}

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

// usageScanner reads a response's engine-reported cached tokens as the
// bytes go by: the whole JSON body, or every SSE data line (the last usage
// wins: vLLM sends it in the final chunk of a stream that asked for
// stream_options.include_usage).
type usageScanner struct {
	sse     bool
	buf     []byte
	over    bool // the body (JSON) or the current line (SSE) exceeded the cap
	invalid bool
	skipped bool // some SSE line was too long to read
	found   bool
	cached  int
}

func (u *usageScanner) write(p []byte) {
	if !u.sse {
		if u.over {
			return
		}
		if len(u.buf)+len(p) > maxUsageBytes {
			u.over, u.buf = true, nil
			return
		}
		u.buf = append(u.buf, p...)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			u.appendLine(p)
			return
		}
		u.appendLine(p[:i])
		if !u.over {
			u.line(u.buf)
		}
		u.buf, u.over = u.buf[:0], false
		p = p[i+1:]
	}
}

func (u *usageScanner) appendLine(p []byte) {
	if u.over {
		return
	}
	if len(u.buf)+len(p) > maxUsageBytes {
		u.over, u.skipped, u.buf = true, true, u.buf[:0]
		return
	}
	u.buf = append(u.buf, p...)
}

// line handles one complete SSE line.
func (u *usageScanner) line(l []byte) {
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

func (u *usageScanner) decode(b []byte) {
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

// result returns the cached tokens and the usage result label.
func (u *usageScanner) result() (cached int, result string) {
	if !u.sse {
		if u.over {
			return 0, usageTooLarge
		}
		u.decode(u.buf)
	} else if len(u.buf) > 0 && !u.over {
		u.line(u.buf) // a last line without newline
	}
	switch {
	case u.found:
		return u.cached, usageObserved
	case u.invalid:
		return 0, usageInvalid
	case u.skipped:
		return 0, usageTooLarge
	}
	return 0, usageAbsent
}
