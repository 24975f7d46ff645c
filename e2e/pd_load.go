package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kvroute/kvroute/gateway"
)

// Kinds of the P/D workload's requests.
const (
	pdFirstTurn = iota // a chat's first turn: the shared system prompt and a question
	pdFollowUp         // a later turn: the whole conversation so far and a new question
	pdDocument         // a one-off long document and a question
	pdKinds
)

// pdWorkload is the P/D step's requests, the same for every policy:
// sessions in a fixed order, each a chat (its turns sent one after the
// other, the conversation growing) or a single document request.
type pdWorkload struct {
	sessions  [][]pdRequest
	requests  int
	maxTokens int
	clients   int
}

type pdRequest struct {
	kind int
	body map[string]any
}

// pdSize is the P/D workload's size: chats of turns turns over systems
// shared system prompts of systemTokens tokens, documents one-off
// documents of docTokens tokens, maxTokens output tokens a request, sent by
// clients concurrent clients.
type pdSize struct {
	chats, turns, systems, systemTokens, documents, docTokens, maxTokens, clients int
}

// pdSizeFor is the workload of the demo's P/D step: 12 chats of 4 turns
// over 2 system prompts of Options.PrefixTokens and 12 documents of 1.5 ×
// that, 32 output tokens each (Fast: 4 chats of 3 turns, 4 documents, 16
// output tokens), from 2 × Options.LoadConcurrency clients: enough that
// the four engines often prefill and decode at once.
func pdSizeFor(o Options) pdSize {
	s := pdSize{chats: 12, turns: 4, systems: 2, systemTokens: o.PrefixTokens, documents: 12, docTokens: o.PrefixTokens * 3 / 2,
		maxTokens: 32, clients: 2 * o.LoadConcurrency}
	if o.Fast {
		s.chats, s.turns, s.documents, s.maxTokens = 4, 3, 4, 16
	}
	return s
}

// newPDWorkload builds the workload: chat c uses system prompt c mod
// systems; each turn adds a ~120-token user message (and, after the
// first, the previous turn's ~60-token assistant reply); chats and
// documents alternate in the session order.
func newPDWorkload(model string, s pdSize) *pdWorkload {
	w := &pdWorkload{maxTokens: s.maxTokens, clients: s.clients}
	systems := make([]string, s.systems)
	for i := range systems {
		systems[i] = document(uint64(300+i), s.systemTokens)
	}
	body := func(msgs []map[string]string) map[string]any {
		return map[string]any{"model": model, "messages": msgs, "max_tokens": s.maxTokens, "stream": true}
	}
	var chats, docs [][]pdRequest
	for c := range s.chats {
		msgs := []map[string]string{{"role": "system", "content": systems[c%s.systems]}}
		var turns []pdRequest
		for t := range s.turns {
			if t > 0 {
				msgs = append(msgs, map[string]string{"role": "assistant", "content": document(uint64(20_000+100*c+t), 60)})
			}
			msgs = append(msgs, map[string]string{"role": "user",
				"content": question(100*c+t) + " " + document(uint64(10_000+100*c+t), 120)})
			kind := pdFollowUp
			if t == 0 {
				kind = pdFirstTurn
			}
			turns = append(turns, pdRequest{kind: kind, body: body(append([]map[string]string(nil), msgs...))})
		}
		chats = append(chats, turns)
	}
	for d := range s.documents {
		msgs := []map[string]string{{"role": "user", "content": document(uint64(30_000+d), s.docTokens) + "\n\n" + question(9000+d)}}
		docs = append(docs, []pdRequest{{kind: pdDocument, body: body(msgs)}})
	}
	for i := range max(len(chats), len(docs)) {
		if i < len(chats) {
			w.sessions = append(w.sessions, chats[i])
		}
		if i < len(docs) {
			w.sessions = append(w.sessions, docs[i])
		}
	}
	for _, ss := range w.sessions {
		w.requests += len(ss)
	}
	return w
}

// pdReply is what the demo client saw of one streamed request.
type pdReply struct {
	kind     int
	endpoint string          // X-Kvroute-Endpoint: the decode endpoint (or the one endpoint)
	prefill  string          // X-Kvroute-Prefill-Endpoint: set when the gateway split the request
	ttft     time.Duration   // to the first token chunk
	gaps     []time.Duration // between consecutive token chunks
	tokens   int
}

// pdRun sends the workload through gw from conc clients, each taking the
// next session and sending its requests in order. A failed request is
// counted (its error kept) and the run goes on; a failed turn ends its
// chat, whose later turns count as failed too.
func pdRun(ctx context.Context, client *http.Client, gw string, wl *pdWorkload, conc int) (replies []pdReply, failed int, firstErr error) {
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(wl.sessions) {
					return
				}
				for t, req := range wl.sessions[i] {
					r, err := pdSend(ctx, client, gw+"/v1/chat/completions", req.body)
					r.kind = req.kind
					mu.Lock()
					if err != nil {
						failed += len(wl.sessions[i]) - t
						if firstErr == nil {
							firstErr = err
						}
					} else {
						replies = append(replies, r)
					}
					mu.Unlock()
					if err != nil {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	return replies, failed, firstErr
}

// pdChunk is what the client reads of one streamed chat chunk.
type pdChunk struct {
	Choices []struct {
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// pdSend POSTs a streaming chat request and times every token chunk (a
// chunk with a choice that is not the role-only first delta).
func pdSend(ctx context.Context, client *http.Client, url string, body any) (pdReply, error) {
	resp, start, err := postJSON(ctx, client, url, body)
	if err != nil {
		return pdReply{}, err
	}
	defer resp.Body.Close()
	r := pdReply{endpoint: resp.Header.Get(gateway.HeaderEndpoint), prefill: resp.Header.Get(gateway.HeaderPrefillEndpoint)}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return r, fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	br := bufio.NewReader(resp.Body)
	var last time.Time
	done := false
	for !done {
		line, err := br.ReadString('\n')
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
			data = strings.TrimSpace(data)
			if data == "[DONE]" {
				done = true
				continue
			}
			now := time.Now()
			var c pdChunk
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				return r, fmt.Errorf("POST %s: bad stream chunk %q: %w", url, data, err)
			}
			if c.Error != nil {
				return r, fmt.Errorf("POST %s: error in the stream: %s", url, c.Error.Message)
			}
			if len(c.Choices) == 0 || c.Choices[0].Delta.Role != "" {
				continue // the role-only first delta or a usage chunk
			}
			if r.tokens == 0 {
				r.ttft = now.Sub(start)
			} else {
				r.gaps = append(r.gaps, now.Sub(last))
			}
			last = now
			r.tokens++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return r, err
		}
	}
	if !done || r.tokens == 0 {
		return r, fmt.Errorf("POST %s: the stream ended after %d tokens without [DONE]", url, r.tokens)
	}
	// Read the stream to its end (the chunked body's last chunk follows
	// [DONE]): closing it before would count as the client's abort at the
	// gateway and cost the connection.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return r, fmt.Errorf("POST %s: after [DONE]: %w", url, err)
	}
	return r, nil
}
