package kvroute

import (
	"github.com/kvroute/kvroute/kvindex"
)

// keys is the block-key stage: every prompt's keys, concatenated, with the
// prompt bounds, the prompt tokens and the number of keys.
func (s *Selection) keys() {
	st, bs := &s.st, s.r.cfg.BlockSize
	model := s.req.Model
	if model == "" {
		model = s.r.cfg.Model
	}
	st.bounds = append(st.bounds, 0)
	var prefix []byte
	for _, p := range s.prompts {
		if len(p.Features) > 0 && prefix == nil {
			prefix = s.mmPrefix()
		}
		st.mm = st.mm[:0]
		for _, m := range p.Features {
			st.mm = append(st.mm, kvindex.MMItem{Hash: m.Hash, Offset: m.Offset, Length: m.Length})
		}
		params := kvindex.KeyParams{Model: model, LoRA: s.req.LoRA, CacheSalt: s.salt, MM: st.mm, MMPrefix: prefix}
		if len(st.keys) == 0 { // the first keys: written in place (Keys writes over dst[:0])
			st.keys = kvindex.Keys(st.keys, p.TokenIDs, bs, &params)
		} else {
			st.tmp = kvindex.Keys(st.tmp, p.TokenIDs, bs, &params)
			st.keys = append(st.keys, st.tmp...)
		}
		s.promptTokens += len(p.TokenIDs)
		st.bounds = append(st.bounds, len(st.keys))
	}
	s.total = len(st.keys)
}

// Keys returns the block keys Match computed for s's request: every
// prompt's keys, in order, concatenated; empty when it could not be
// rendered or no prompt fills a block. They are the keys the index is
// looked up and written by (model or LoRA at the root, cache salt,
// multimodal items), for a profile that keys something else by them
// (package session derives a session key from the opening of a
// conversation). The slice is valid until the Selection is released.
// A method of the profile stages (beside Prompts), not of Selection: the
// root package's exported surface stays within its budget.
func (p stages) Keys(s *Selection) []kvindex.Key { return s.st.keys[:s.total] }
