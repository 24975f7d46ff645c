package sim

import (
	"math/rand/v2"
	"time"
)

// pdTrace is one P/D run's traffic, drawn from the seed before the run so
// that every policy sees the same prompts, answers, think times and
// arrivals: units (a chat session or a document) arrive as a Poisson
// process, a session's later turns come a think time after the previous
// answer ended.
type pdTrace struct {
	units    []pdUnit
	systems  [][]uint32
	sysOf    []int             // session → system prompt
	users    [][][]uint32      // [session][turn]
	answers  [][][]uint32      // [session][turn]
	think    [][]time.Duration // [session][turn]: before turn+1
	docs     [][]uint32
	docAns   [][]uint32
	requests int
}

// pdUnit is one arrival of a session's first turn or of a document.
type pdUnit struct {
	at      time.Time
	session int // -1 for a document
	doc     int
}

// newPDTrace draws the trace at c.Load × c.Capacity requests per second.
func newPDTrace(c PDConfig, start time.Time) *pdTrace {
	w := c.Workload
	seed := c.Base.Seed
	content := rand.New(rand.NewPCG(seed, 0x9d01))
	times := rand.New(rand.NewPCG(seed, 0x9d02))
	order := rand.New(rand.NewPCG(seed, 0x9d03))
	docs := int(float64(w.Requests)*w.DocumentFraction + 0.5)
	sessions := (w.Requests - docs) / w.Turns
	docs = w.Requests - sessions*w.Turns
	t := &pdTrace{requests: w.Requests}
	for range w.SystemPrompts {
		t.systems = append(t.systems, randTokens(content, w.SystemTokens))
	}
	for s := range sessions {
		t.sysOf = append(t.sysOf, s%w.SystemPrompts)
		var us, as [][]uint32
		var th []time.Duration
		for range w.Turns {
			us = append(us, randTokens(content, w.UserTokens))
			as = append(as, randTokens(content, w.OutputTokens))
			th = append(th, time.Duration(times.ExpFloat64()*float64(w.ThinkTime)))
		}
		t.users, t.answers, t.think = append(t.users, us), append(t.answers, as), append(t.think, th)
	}
	for range docs {
		t.docs = append(t.docs, randTokens(content, w.DocumentTokens))
		t.docAns = append(t.docAns, randTokens(content, w.OutputTokens))
	}
	for s := range sessions {
		t.units = append(t.units, pdUnit{session: s})
	}
	for d := range docs {
		t.units = append(t.units, pdUnit{session: -1, doc: d})
	}
	order.Shuffle(len(t.units), func(i, j int) { t.units[i], t.units[j] = t.units[j], t.units[i] })
	rate := c.Load * c.Capacity * float64(len(t.units)) / float64(w.Requests)
	at := start
	for i := range t.units {
		at = at.Add(time.Duration(times.ExpFloat64() / rate * float64(time.Second)))
		t.units[i].at = at
	}
	return t
}

// turn returns session s's prompt of turn k, and its answer.
func (t *pdTrace) turn(s, k int) (prompt, answer []uint32) {
	n := len(t.systems[t.sysOf[s]])
	for j := 0; j <= k; j++ {
		n += len(t.users[s][j])
		if j < k {
			n += len(t.answers[s][j])
		}
	}
	prompt = make([]uint32, 0, n)
	prompt = append(prompt, t.systems[t.sysOf[s]]...)
	for j := 0; j < k; j++ {
		prompt = append(append(prompt, t.users[s][j]...), t.answers[s][j]...)
	}
	return append(prompt, t.users[s][k]...), t.answers[s][k]
}
