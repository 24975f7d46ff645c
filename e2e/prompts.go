package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/kvroute/kvroute/simengine"
)

// words is the vocabulary of the generated documents.
var words = strings.Fields(`the a cache router engine prefix block token request model server
gateway event index replay stream batch prompt answer question system user policy tenant
latency throughput memory layer attention key value store remove clear hash chain parent
child endpoint pod node cluster region zone deploy scale route pick score load filter
affinity threshold penalty budget window chunk prefill decode step queue wait run finish
report metric counter gauge histogram label sample scrape alert dashboard panel query
careful quick steady bright calm early late simple exact precise shared private public
contract invoice customer order payment refund account balance ledger audit policy claim
river mountain forest valley ocean island desert meadow harbor bridge tower garden castle`)

// document returns deterministic text of at least tokens tokens (by the
// simulated engine's tokenizer), different for every seed: sentences of
// vocabulary words, as a long shared system prompt would be.
func document(seed uint64, tokens int) string {
	rng := rand.New(rand.NewPCG(seed, 0x6b76726f757465))
	var b strings.Builder
	fmt.Fprintf(&b, "Document %d. ", seed)
	n := 0
	var scratch []uint32
	for n < tokens {
		start := b.Len()
		words := 6 + rng.IntN(10)
		for i := range words {
			w := pickWord(rng)
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
			if i < words-1 {
				b.WriteByte(' ')
			}
		}
		b.WriteByte('.')
		// Count without the separating space, which joins the next word.
		scratch = simengine.Tokenize(scratch[:0], b.String()[start:])
		n += len(scratch)
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String())
}

func pickWord(rng *rand.Rand) string { return words[rng.IntN(len(words))] }

// question returns the user turn of request i: short and unique.
func question(i int) string {
	return fmt.Sprintf("Question %d: summarise section %d of the document in one sentence.", i, i*7+3)
}

// chatBody is a chat-completions request with a system prompt and a
// question.
func chatBody(model, system, user string, maxTokens int, stream bool) map[string]any {
	return map[string]any{
		"model": model,
		"messages": []map[string]string{
			{"role": "system", "content": system},
			{"role": "user", "content": user},
		},
		"max_tokens": maxTokens,
		"stream":     stream,
	}
}
