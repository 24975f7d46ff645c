package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// prober sends one streaming completions request and times its first chunk.
type prober struct {
	client   *http.Client
	endpoint string
	model    string
	timeout  time.Duration
	now      func() time.Time // read exactly twice per request: at send and at the first data event
}

type completionRequest struct {
	Model     string   `json:"model"`
	Prompt    []uint32 `json:"prompt"`
	MaxTokens int      `json:"max_tokens"`
	Stream    bool     `json:"stream"`
}

// maxSSELine bounds one server-sent-events line.
const maxSSELine = 1 << 20

// ttft sends prompt as a token array with max_tokens 1 and stream true and
// returns the time until the first SSE data event. It then drains the rest of
// the stream, so the next request starts on an idle engine.
func (p *prober) ttft(ctx context.Context, prompt []uint32) (time.Duration, error) {
	body, err := json.Marshal(completionRequest{Model: p.model, Prompt: prompt, MaxTokens: 1, Stream: true})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")

	start := p.now()
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("HTTP %d from %s: %s", resp.StatusCode, p.endpoint, bytes.TrimSpace(msg))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(bytes.TrimRight(sc.Bytes(), "\r"), []byte("data:"))
		if !ok {
			continue // event fields, comments (keep-alives), blank separators
		}
		d := p.now().Sub(start)
		data = bytes.TrimSpace(data)
		if bytes.Equal(data, []byte("[DONE]")) {
			return 0, errors.New("stream ended before the first completion chunk")
		}
		var chunk struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &chunk) == nil && len(chunk.Error) > 0 && string(chunk.Error) != "null" {
			return 0, fmt.Errorf("server error in stream: %s", chunk.Error)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, fmt.Errorf("reading the rest of the stream: %w", err)
		}
		return d, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading the stream: %w", err)
	}
	return 0, errors.New("stream ended without a data event (is the endpoint streaming server-sent events?)")
}
