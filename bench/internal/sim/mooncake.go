package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Mooncake trace format (the FAST'25 release of kvcache-ai/Mooncake,
// FAST25-release/traces/*.jsonl): one JSON object per line,
//
//	{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59]}
//
// timestamp is the arrival in milliseconds from the trace's start,
// input_length and output_length are token counts, and hash_ids are the
// prompt's block hashes at MooncakeBlockTokens tokens per block, remapped to
// small integers: two requests whose hash_ids agree on their first k entries
// share their first k × 512 prompt tokens. The last block may be partial.
const MooncakeBlockTokens = 512

// Bounds of the trace decoder. A line is at most MaxTraceLineBytes long, a
// request at most MaxTraceTokens tokens in or out (so at most
// MaxTraceTokens / 512 hash IDs), and a window keeps at most
// MaxTraceRequests requests: whatever the input, the decoder's memory is
// bounded by the window it keeps, and a prompt built from a request is at
// most 8 MiB of token IDs.
const (
	MaxTraceLineBytes = 1 << 20
	MaxTraceTokens    = 1 << 21
	MaxTraceRequests  = 1 << 20
	// maxTraceTimestamp keeps a timestamp in milliseconds convertible to a
	// time.Duration.
	maxTraceTimestamp = math.MaxInt64 / 1_000_000
)

// TraceRequest is one line of a Mooncake trace.
type TraceRequest struct {
	// Timestamp is the arrival, in milliseconds from the trace's start.
	Timestamp int64 `json:"timestamp"`
	// InputLength and OutputLength are the prompt's and the answer's tokens.
	InputLength  int `json:"input_length"`
	OutputLength int `json:"output_length"`
	// HashIDs are the prompt's block hashes, one per 512 tokens (the last
	// block may be partial).
	HashIDs []int64 `json:"hash_ids"`
}

// TraceWindow selects a contiguous run of a trace's requests: Count
// requests (0: all that remain) starting with the one on line Start+1.
type TraceWindow struct {
	Start int `json:"start"`
	Count int `json:"count"`
}

// TraceData is a decoded window of a Mooncake trace, the requests of a
// Trace workload.
type TraceData struct {
	// Source names the trace in the report (its file name).
	Source string `json:"source"`
	// Window is the part of the trace kept; Total is how many requests the
	// whole trace has.
	Window TraceWindow `json:"window"`
	Total  int         `json:"total"`
	// Requests are the window's requests, in the trace's order.
	Requests []TraceRequest `json:"-"`
}

// ErrTrace is wrapped by every error of the trace decoder.
var ErrTrace = errors.New("sim: bad mooncake trace")

// ReadMooncakeTrace decodes a Mooncake trace and keeps the requests of w.
// It is strict: every line must be one JSON object with exactly the four
// keys (none twice, no other), integer values in range, hash_ids as long as
// input_length needs (⌈input_length ÷ 512⌉ IDs), timestamps not decreasing,
// no empty line and no line longer than MaxTraceLineBytes. Every line is
// checked, also those outside the window; the first bad one is reported
// with its line number.
func ReadMooncakeTrace(r io.Reader, source string, w TraceWindow) (*TraceData, error) {
	if w.Start < 0 || w.Count < 0 || w.Count > MaxTraceRequests {
		return nil, fmt.Errorf("%w: window start %d, count %d: want start >= 0 and count in [0, %d]", ErrTrace, w.Start, w.Count, MaxTraceRequests)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxTraceLineBytes)
	td := &TraceData{Source: source, Window: w}
	line, prev := 0, int64(-1)
	var req TraceRequest
	for sc.Scan() {
		line++
		if err := parseTraceLine(sc.Bytes(), &req); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrTrace, line, err)
		}
		if req.Timestamp < prev {
			return nil, fmt.Errorf("%w: line %d: timestamp %d is before the previous line's %d (a trace must be in arrival order)", ErrTrace, line, req.Timestamp, prev)
		}
		prev = req.Timestamp
		i := line - 1
		if i >= w.Start && (w.Count == 0 || i < w.Start+w.Count) {
			if len(td.Requests) == MaxTraceRequests {
				return nil, fmt.Errorf("%w: line %d: the window would keep more than %d requests; pass a window", ErrTrace, line, MaxTraceRequests)
			}
			td.Requests = append(td.Requests, req)
		}
		req = TraceRequest{}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d: longer than %d bytes", ErrTrace, line+1, MaxTraceLineBytes)
		}
		return nil, fmt.Errorf("%w: after line %d: %w", ErrTrace, line, err)
	}
	td.Total = line
	if len(td.Requests) == 0 {
		return nil, fmt.Errorf("%w: no request in the window (start %d, count %d) of %d requests", ErrTrace, w.Start, w.Count, line)
	}
	td.Window.Count = len(td.Requests)
	return td, nil
}

// parseTraceLine decodes one line into req (which must be zero).
func parseTraceLine(b []byte, req *TraceRequest) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("empty line")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := expectDelim(dec, '{', "a JSON object"); err != nil {
		return err
	}
	var seen [4]bool
	keys := [4]string{"timestamp", "input_length", "output_length", "hash_ids"}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return syntaxErr(err)
		}
		key, _ := t.(string)
		k := -1
		for j, name := range keys {
			if key == name {
				k = j
			}
		}
		switch {
		case k < 0:
			return fmt.Errorf("unknown key %q", truncate(key))
		case seen[k]:
			return fmt.Errorf("key %q given twice", key)
		}
		seen[k] = true
		switch k {
		case 0:
			req.Timestamp, err = traceInt(dec, key, maxTraceTimestamp)
		case 1:
			var v int64
			v, err = traceInt(dec, key, MaxTraceTokens)
			req.InputLength = int(v)
		case 2:
			var v int64
			v, err = traceInt(dec, key, MaxTraceTokens)
			req.OutputLength = int(v)
		case 3:
			req.HashIDs, err = traceIDs(dec)
		}
		if err != nil {
			return err
		}
	}
	if err := expectDelim(dec, '}', "the end of the object"); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the object")
	}
	for j, ok := range seen {
		if !ok {
			return fmt.Errorf("missing key %q", keys[j])
		}
	}
	switch n, want := len(req.HashIDs), (req.InputLength+MooncakeBlockTokens-1)/MooncakeBlockTokens; {
	case req.InputLength < 1 || req.OutputLength < 1:
		return fmt.Errorf("input_length %d and output_length %d must be at least 1", req.InputLength, req.OutputLength)
	case n != want:
		return fmt.Errorf("input_length %d needs %d hash_ids of %d tokens, got %d", req.InputLength, want, MooncakeBlockTokens, n)
	}
	return nil
}

// traceInt reads a non-negative integer value of at most hi.
func traceInt(dec *json.Decoder, key string, hi int64) (int64, error) {
	t, err := dec.Token()
	if err != nil {
		return 0, syntaxErr(err)
	}
	num, ok := t.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s: want an integer, got %s", key, kindOf(t))
	}
	v, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil || v < 0 || v > hi {
		return 0, fmt.Errorf("%s: want an integer in [0, %d], got %s", key, hi, truncate(string(num)))
	}
	return v, nil
}

// traceIDs reads the hash_ids array: non-negative integers, at most
// MaxTraceTokens / MooncakeBlockTokens of them.
func traceIDs(dec *json.Decoder) ([]int64, error) {
	if err := expectDelim(dec, '[', "hash_ids: an array"); err != nil {
		return nil, err
	}
	var ids []int64
	for dec.More() {
		if len(ids) == MaxTraceTokens/MooncakeBlockTokens {
			return nil, fmt.Errorf("hash_ids: more than %d entries", MaxTraceTokens/MooncakeBlockTokens)
		}
		v, err := traceInt(dec, "hash_ids", math.MaxInt64)
		if err != nil {
			return nil, err
		}
		ids = append(ids, v)
	}
	return ids, expectDelim(dec, ']', "the end of hash_ids")
}

func expectDelim(dec *json.Decoder, d json.Delim, want string) error {
	t, err := dec.Token()
	if err != nil {
		return syntaxErr(err)
	}
	if got, ok := t.(json.Delim); !ok || got != d {
		return fmt.Errorf("want %s, got %s", want, kindOf(t))
	}
	return nil
}

// syntaxErr words a JSON syntax error (a line ending early is EOF).
func syntaxErr(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("the line ends inside a JSON value")
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func kindOf(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", v.String())
	case string:
		return "a string"
	case json.Number:
		return "the number " + truncate(string(v))
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", t)
}

// truncate bounds a piece of input quoted in an error.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
