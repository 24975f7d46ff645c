package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute/gateway"
)

// reply is what the demo's client saw of one request.
type reply struct {
	Status       int
	Endpoint     string        // X-Kvroute-Endpoint
	PromptTokens int           // X-Kvroute-Prompt-Tokens (the router's count)
	CachedTokens int           // X-Kvroute-Cached-Tokens (the router's prediction)
	TTFT         time.Duration // to the first "data:" event (streaming) or the first body byte
	Body         []byte        // the whole body (for streams: every event)
}

// send POSTs body as JSON to url and reads the whole response, timing the
// first streamed event as the client's time to first token.
func send(ctx context.Context, client *http.Client, url string, body any) (reply, error) {
	resp, start, err := postJSON(ctx, client, url, body)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	r := reply{Status: resp.StatusCode, Endpoint: resp.Header.Get(gateway.HeaderEndpoint)}
	r.PromptTokens, _ = strconv.Atoi(resp.Header.Get(gateway.HeaderPromptTokens))
	r.CachedTokens, _ = strconv.Atoi(resp.Header.Get(gateway.HeaderCachedTokens))
	var buf bytes.Buffer
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if r.TTFT == 0 && strings.HasPrefix(line, "data:") {
				r.TTFT = time.Since(start)
			}
			buf.WriteString(line)
			if err == io.EOF {
				break
			}
			if err != nil {
				return r, err
			}
		}
	} else {
		var one [1]byte
		n, err := io.ReadFull(resp.Body, one[:])
		r.TTFT = time.Since(start)
		buf.Write(one[:n])
		if err == nil {
			_, err = io.Copy(&buf, resp.Body)
		}
		if err != nil && err != io.EOF {
			return r, err
		}
	}
	r.Body = buf.Bytes()
	if r.Status != http.StatusOK {
		return r, fmt.Errorf("POST %s: %d %s", url, r.Status, strings.TrimSpace(string(r.Body)))
	}
	return r, nil
}

// postJSON POSTs body as JSON to url and returns the response (the caller
// closes its body) and when the request was sent, the start of the
// client's latencies.
func postJSON(ctx context.Context, client *http.Client, url string, body any) (*http.Response, time.Time, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, time.Time{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	return resp, start, err
}

// post sends an empty POST (e.g. /reset_prefix_cache) and checks for 200.
func post(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
