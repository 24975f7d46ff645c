package session

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// A derived session key (Config.Derive) is the block key of the
// conversation's opening: the Profile renders the opening (the request
// with its messages cut after the first user message) through the
// Router's own stages (kvroute.Selection: the render endpoints, then the
// block keys with the model or LoRA at the root, the cache salt and the
// multimodal items) and takes the key of its last full block, "b:" and
// its hex. Every later turn repeats the opening, so it renders to the
// same tokens and the same key, which is also the key the index holds the
// opening's blocks by. The render costs one call to a render endpoint per
// conversation: the key is remembered by the opening's text hash for the
// TTL (at most MaxEntries openings, forgotten as the sessions are: see
// Config.MaxEntries).
//
// When there is no block key to take, the key is the hash of the opening's
// text, "d:" and its hex: an opening shorter than one block, a render
// that failed (retried on the next turn), or stages that cannot render
// alone (not a Router's). A body with no user message has no key.

// openingMembers are the members of a request body its opening is made
// of: the messages up to and including the first user message (chat
// completions and Anthropic messages: "messages"; responses: "input" as a
// list), with the system prompt (Anthropic's "system", responses'
// "instructions"), the model and the cache salt, which roots the
// opening's block keys: conversations that open alike under two salts
// (tenants) render to different keys, so their openings' memo entries
// must differ too.
var openingMembers = []string{"messages", "input", "system", "instructions", "model", "cache_salt"}

// messageMembers are the members of a message the opening is made of.
var messageMembers = []string{"role", "content"}

// message is one message of an opening: its role and its content's JSON
// text as the body holds it.
type message struct {
	role    string
	content []byte
}

// parseOpening returns the hash of a body's opening (its model, cache
// salt, system prompt and messages up to the first user message), the
// messages' field
// and how many messages the opening holds; ok is false when the body is not
// JSON or has no user message (a plain completions prompt has no turns to
// tell apart). Members are read as the engine reads them
// (jsonscan.Members): by their exact names, the last of a repeated one, so
// that a "Messages" or "ROLE" the engine ignores is no part of the opening.
func parseOpening(body []byte) (hash uint64, field string, n int, ok bool) {
	var v [6][]byte
	if len(body) == 0 || jsonscan.Members(body, openingMembers, v[:]) != nil {
		return 0, "", 0, false
	}
	model, ok := nullableString(v[4])
	if !ok {
		return 0, "", 0, false
	}
	msgs, err := parseMessages(v[0])
	if err != nil {
		return 0, "", 0, false
	}
	field = "messages"
	if len(msgs) == 0 && len(v[1]) > 0 && v[1][0] == '[' {
		if msgs, err = parseMessages(v[1]); err != nil {
			return 0, "", 0, false
		}
		field = "input"
	}
	d := xxhash.New()
	_, _ = d.WriteString(model)
	_, _ = d.Write([]byte{0})
	_, _ = d.Write(v[2])
	_, _ = d.Write(v[3])
	if v[5] != nil { // a body without a salt keeps the hash it always had
		_, _ = d.Write([]byte{0})
		_, _ = d.Write(v[5])
	}
	for i, m := range msgs {
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(m.role)
		_, _ = d.Write([]byte{0})
		_, _ = d.Write(m.content)
		if m.role == "user" {
			return d.Sum64(), field, i + 1, true
		}
	}
	return 0, "", 0, false
}

// parseMessages reads a list of messages (nil for an absent or null
// list); a null message is one without role or content. A message's role
// must be a string or null.
func parseMessages(raw []byte) ([]message, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	s := jsonscan.Scanner{Buf: raw}
	if !s.Consume('[') {
		return nil, errNotList
	}
	var msgs []message
	s.WS()
	if s.Consume(']') {
		return msgs, nil
	}
	for {
		s.WS()
		start := s.Pos
		if err := s.SkipValue(1, maxMessageDepth, math.MaxInt); err != nil {
			return nil, err
		}
		var m message
		if elem := raw[start:s.Pos]; string(elem) != "null" {
			var v [2][]byte
			if err := jsonscan.Members(elem, messageMembers, v[:]); err != nil {
				return nil, err
			}
			role, ok := nullableString(v[0])
			if !ok {
				return nil, errNotList
			}
			m = message{role: role, content: v[1]}
		}
		msgs = append(msgs, m)
		s.WS()
		if s.Consume(',') {
			continue
		}
		if s.Consume(']') {
			return msgs, nil
		}
		return nil, errNotList
	}
}

// maxMessageDepth bounds the nesting of a message, encoding/json's own
// bound.
const maxMessageDepth = 10000

// errNotList is parseMessages' error for anything but a list of messages.
var errNotList = errors.New("not a list of messages")

// nullableString decodes raw, a JSON string or null ("" then, and for an
// absent member); ok is false for any other value.
func nullableString(raw []byte) (string, bool) {
	if raw == nil || string(raw) == "null" {
		return "", true
	}
	if raw[0] != '"' {
		return "", false
	}
	s, err := jsonscan.Unquote(raw)
	return s, err == nil
}

// textKey is the derived key of a body without rendering: "d:" and the
// hex of its opening's hash; "" without an opening.
func textKey(body []byte) string {
	h, _, _, ok := parseOpening(body)
	if !ok {
		return ""
	}
	return "d:" + strconv.FormatUint(h, 16)
}

// openingBody is body with its messages field cut to its first n
// messages; every other field (tools, chat template options) stays, since
// it may render into the prompt.
func openingBody(body []byte, field string, n int) ([]byte, bool) {
	var obj map[string]json.RawMessage
	var msgs []json.RawMessage
	if json.Unmarshal(body, &obj) != nil || json.Unmarshal(obj[field], &msgs) != nil || len(msgs) < n {
		return nil, false
	}
	cut, err := json.Marshal(msgs[:n])
	if err != nil {
		return nil, false
	}
	obj[field] = cut
	out, err := json.Marshal(obj)
	return out, err == nil
}

// renderStages are the stages a Router passes its Profile, which render a
// request alone (see kvroute.Profile).
type renderStages interface {
	Match(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint) (*kvroute.Selection, error)
	Prompts(s *kvroute.Selection) ([]render.Prompt, string)
	Keys(s *kvroute.Selection) []kvindex.Key
}

// deriveKey is the Profile's derived key of req (see above).
func (a *Affinity) deriveKey(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint, stages kvroute.Picker) string {
	h, field, n, ok := parseOpening(req.Body)
	if !ok {
		return ""
	}
	text := "d:" + strconv.FormatUint(h, 16)
	st, ok := stages.(renderStages)
	if !ok || len(req.Prompts) > 0 {
		return text
	}
	k, state := a.memo.lookup(h, a.now())
	if state == found {
		// Refreshed as the session's own record is by each turn: a
		// conversation whose turns come within the TTL of each other
		// renders its opening once, however long it runs.
		a.remember(h, k)
		return k
	}
	if state == expired {
		a.met.derivedDropped[dropExpired].Inc() // the lookup removed it
	}
	body, ok := openingBody(req.Body, field, n)
	if !ok {
		return text
	}
	s, err := st.Match(ctx, &kvroute.Request{API: req.API, Body: body, Header: req.Header, Model: req.Model, LoRA: req.LoRA,
		CacheSalt: req.CacheSalt}, endpoints)
	if err != nil {
		return text // the pick that follows meets the same error
	}
	defer s.Release()
	if prompts, _ := st.Prompts(s); prompts == nil {
		return text // not rendered: try again on the next turn
	}
	k = text
	if keys := st.Keys(s); len(keys) > 0 {
		k = "b:" + strconv.FormatUint(uint64(keys[len(keys)-1]), 16)
	}
	a.remember(h, k)
	return k
}

// remember records the derived key k of the opening hashed h in the memo
// and counts the openings the memo forgot to make room for it
// (kvroute_session_derived_keys_dropped_total): their conversations'
// next turns render again, and may get another key if that render fails.
func (a *Affinity) remember(h uint64, k string) {
	exp, ev, _ := a.memo.record(h, k, a.now(), false) // a local record is always stored
	if exp > 0 {
		a.met.derivedDropped[dropExpired].Add(float64(exp))
	}
	if ev > 0 {
		a.met.derivedDropped[dropEvicted].Add(float64(ev))
	}
}
