package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

func readSSE(t *testing.T, url string, body any) []sseEvent {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := testClient.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case line == "":
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func TestChatStreaming(t *testing.T) {
	_, base := startServer(t, Config{})
	body := chatBody("Stream this", 5)
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	evs := readSSE(t, base+"/v1/chat/completions", body)
	require.Equal(t, "[DONE]", evs[len(evs)-1].data)
	type chunk struct {
		Object  string `json:"object"`
		Choices []struct {
			Delta struct {
				Role    string  `json:"role"`
				Content *string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *usage `json:"usage"`
	}
	first := decode[chunk](t, []byte(evs[0].data))
	require.Equal(t, "assistant", first.Choices[0].Delta.Role)
	var text string
	var finish []string
	for _, e := range evs[1 : len(evs)-2] {
		c := decode[chunk](t, []byte(e.data))
		require.Equal(t, "chat.completion.chunk", c.Object)
		text += *c.Choices[0].Delta.Content
		if c.Choices[0].FinishReason != nil {
			finish = append(finish, *c.Choices[0].FinishReason)
		}
	}
	require.Equal(t, []string{"length"}, finish)
	require.Len(t, strings.Fields(text), 5)
	u := decode[chunk](t, []byte(evs[len(evs)-2].data)).Usage
	require.NotNil(t, u)
	require.Equal(t, 5, u.CompletionTokens)

	// Non-streaming gives the same deterministic text.
	code, out := post(t, base+"/v1/chat/completions", chatBody("Stream this", 5))
	require.Equal(t, http.StatusOK, code)
	var resp struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Equal(t, text, resp.Choices[0].Message.Content)
	require.Positive(t, resp.Usage.PromptTokensDetails.CachedTokens, "the second request hits the first one's blocks")
}

func TestCompletionsStreamingMultiplePrompts(t *testing.T) {
	_, base := startServer(t, Config{})
	evs := readSSE(t, base+"/v1/completions", map[string]any{"prompt": []string{"one", "two"}, "max_tokens": 3, "stream": true})
	require.Equal(t, "[DONE]", evs[len(evs)-1].data)
	perIndex := map[int]int{}
	for _, e := range evs[:len(evs)-1] {
		var c struct {
			Choices []struct {
				Index int    `json:"index"`
				Text  string `json:"text"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(e.data), &c))
		perIndex[c.Choices[0].Index]++
	}
	require.Equal(t, map[int]int{0: 3, 1: 3}, perIndex)
}

func TestMessagesAndResponsesStreaming(t *testing.T) {
	_, base := startServer(t, Config{})
	evs := readSSE(t, base+"/v1/messages", map[string]any{"model": "m", "max_tokens": 4, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": "hello"}}})
	var names []string
	for _, e := range evs {
		names = append(names, e.name)
	}
	require.Equal(t, []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}, names)

	evs = readSSE(t, base+"/v1/responses", map[string]any{"model": "m", "max_output_tokens": 2, "stream": true, "input": "hello"})
	names = names[:0]
	for _, e := range evs {
		names = append(names, e.name)
	}
	require.Equal(t, []string{"response.created", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.completed"}, names)
	var done struct {
		Response respBody `json:"response"`
	}
	require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-1].data), &done))
	require.Equal(t, "completed", done.Response.Status)
	require.Equal(t, 2, done.Response.Usage.OutputTokens)

	// Non-streaming shapes.
	code, out := post(t, base+"/v1/messages", map[string]any{"model": "m", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": "hello"}}})
	require.Equal(t, http.StatusOK, code)
	m := decode[msgBody](t, out)
	require.Equal(t, "message", m.Type)
	require.Equal(t, 2, m.Usage.OutputTokens)
	require.Equal(t, "max_tokens", *m.StopReason)
	code, out = post(t, base+"/v1/responses", map[string]any{"model": "m", "input": []map[string]any{{"role": "user", "content": "hello"}}})
	require.Equal(t, http.StatusOK, code)
	r := decode[respBody](t, out)
	require.Equal(t, 16, r.Usage.OutputTokens, "default max tokens")
}

func TestClientAbortReleasesEngineRequest(t *testing.T) {
	s, base := startServer(t, Config{})
	body := chatBody("a long answer please", 2000)
	body["stream"] = true
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// Wait for the first chunk, then hang up.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "))
	require.Equal(t, 1, s.Engine().Stats().Running)
	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool {
		st := s.Engine().Stats()
		return st.Running == 0 && st.RequestAborted == 1
	}, 10*time.Second, 5*time.Millisecond)
}

// The Messages API answers the errors its handler finds (an unknown model,
// a request past the context) in Anthropic's error shape, as vLLM's
// /v1/messages translates them: {"type":"error","error":{"type","message"}}
// with the status of the error. Failures of the request's validation (no
// max_tokens) keep vLLM's ErrorResponse, as FastAPI's validation answers
// them before the handler runs.
func TestMessagesErrorsInAnthropicShape(t *testing.T) {
	_, base := startServer(t, Config{MaxModelLen: 64})
	type anthropicErr struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	msgs := []map[string]any{{"role": "user", "content": "hello"}}
	code, body := post(t, base+"/v1/messages", map[string]any{"model": "nope", "max_tokens": 2, "messages": msgs})
	require.Equal(t, http.StatusNotFound, code, "%s", body)
	e := decode[anthropicErr](t, body)
	require.Equal(t, "error", e.Type, "%s", body)
	require.Equal(t, "NotFoundError", e.Error.Type)
	require.Equal(t, "The model `nope` does not exist.", e.Error.Message)

	code, body = post(t, base+"/v1/messages", map[string]any{"model": "m", "max_tokens": 100, "messages": msgs})
	require.Equal(t, http.StatusBadRequest, code, "%s", body)
	e = decode[anthropicErr](t, body)
	require.Equal(t, "error", e.Type, "%s", body)
	require.Equal(t, "BadRequestError", e.Error.Type)
	require.Contains(t, e.Error.Message, "maximum context length is 64 tokens")

	code, body = post(t, base+"/v1/messages", map[string]any{"model": "nope", "messages": msgs})
	require.Equal(t, http.StatusBadRequest, code, "validation comes first: %s", body)
	v := decode[errorBody](t, body)
	require.Equal(t, 400, v.Error.Code)
	require.Equal(t, "BadRequestError", v.Error.Type)
}
