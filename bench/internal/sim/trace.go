package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Token IDs of generated prompts are drawn from [tokenLow, tokenHigh), a
// vocabulary-sized range away from the engine model's special tokens.
const (
	tokenLow  = 1000
	tokenHigh = 150_000
)

// arrival is one request waiting to arrive.
type arrival struct {
	at      time.Time
	prompt  []uint32
	session int // MultiTurn: the session; -1 otherwise
	turn    int
	// Trace: the request's index in the trace window (its prompt is built
	// on arrival) and its output length.
	trace        int
	outputTokens int
	// SharedState.LeaderRTT: the replica that forwarded the request to the
	// leader, plus one; 0 for a request not forwarded.
	forwardedFrom int
}

// trace is the policy-independent part of a run: every prompt's content and
// the open-loop arrival times, all drawn from the seed. For MultiTurn only
// the first turns arrive open-loop; later turns are built from the engine's
// answer and arrive a think time after it (the engine's answers depend only
// on the prompt, so every policy sees the same conversations).
type trace struct {
	w        Workload
	open     []arrival
	users    [][][]uint32      // MultiTurn: per session, per turn, the user message
	think    [][]time.Duration // MultiTurn: per session, per turn, the think time after it
	sessions int
}

// newTrace draws the run's prompts and arrivals. rate is in requests per
// second; start is the virtual time of the first possible arrival.
func newTrace(cfg Config, start time.Time) *trace {
	w := cfg.Workload
	rate := cfg.Load * cfg.Capacity()
	t := &trace{w: w}
	content := rand.New(rand.NewPCG(cfg.Seed, 0xc0)) // prompt content
	times := rand.New(rand.NewPCG(cfg.Seed, 0x71))   // arrival process
	gap := func(r float64) time.Duration {
		return time.Duration(times.ExpFloat64() / r * float64(time.Second))
	}
	at := start
	switch w.Kind {
	case SharedPrefix, ZipfDrift, Heterogeneous:
		contexts := make([][]uint32, w.Groups)
		for g := range contexts {
			contexts[g] = randTokens(content, w.ContextTokens)
		}
		questions := make([][]uint32, w.Groups*w.Users)
		for i := range questions {
			questions[i] = randTokens(content, w.QuestionTokens)
		}
		pick := rand.New(rand.NewPCG(cfg.Seed, 0x9a))
		var z *zipfGroups
		if w.Kind == ZipfDrift {
			z = newZipfGroups(w, rand.New(rand.NewPCG(cfg.Seed, 0x21)))
		}
		for i := 0; i < w.Requests; i++ {
			at = at.Add(gap(rate))
			g, u := pick.IntN(w.Groups), pick.IntN(w.Users)
			if z != nil {
				g = z.group(i, pick.Float64())
			}
			p := make([]uint32, 0, w.ContextTokens+w.QuestionTokens)
			p = append(append(p, contexts[g]...), questions[g*w.Users+u]...)
			t.open = append(t.open, arrival{at: at, prompt: p, session: -1})
		}
	case MultiTurn:
		systems := make([][]uint32, w.SystemPrompts)
		for i := range systems {
			systems[i] = randTokens(content, w.SystemTokens)
		}
		t.sessions = w.Requests / w.Turns
		t.users = make([][][]uint32, t.sessions)
		t.think = make([][]time.Duration, t.sessions)
		thinkRand := rand.New(rand.NewPCG(cfg.Seed, 0x7b))
		for s := 0; s < t.sessions; s++ {
			at = at.Add(gap(rate / float64(w.Turns)))
			for k := 0; k < w.Turns; k++ {
				t.users[s] = append(t.users[s], randTokens(content, w.UserTokens))
				t.think[s] = append(t.think[s], time.Duration(thinkRand.ExpFloat64()*float64(w.ThinkTime)))
			}
			sys := systems[s%len(systems)]
			p := make([]uint32, 0, w.SystemTokens+w.UserTokens)
			p = append(append(p, sys...), t.users[s][0]...)
			t.open = append(t.open, arrival{at: at, prompt: p, session: s})
		}
	case Trace:
		t.open = traceArrivals(w.Trace, rate, start)
	case NoReuse:
		for i := 0; i < w.Requests; i++ {
			at = at.Add(gap(rate))
			t.open = append(t.open, arrival{at: at, prompt: randTokens(content, w.PromptTokens), session: -1})
		}
	}
	return t
}

// nextTurn returns the prompt of the turn after turn of session: the
// previous prompt, the engine's answer and the next user message; ok is
// false after the last turn.
func (t *trace) nextTurn(session, turn int, prompt, answer []uint32) (next []uint32, think time.Duration, ok bool) {
	if t.w.Kind != MultiTurn || turn+1 >= t.w.Turns {
		return nil, 0, false
	}
	user := t.users[session][turn+1]
	next = make([]uint32, 0, len(prompt)+len(answer)+len(user))
	next = append(append(append(next, prompt...), answer...), user...)
	return next, t.think[session][turn], true
}

func randTokens(r *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = tokenLow + uint32(r.IntN(tokenHigh-tokenLow))
	}
	return out
}

// zipfGroups draws groups for the zipf-drift workload: rank r (0-based)
// with probability ∝ 1/(r+1)^s, mapped to a group through a permutation
// that is redrawn at the start of each of the run's phases.
type zipfGroups struct {
	cdf      []float64
	perms    [][]int
	perPhase int
}

func newZipfGroups(w Workload, r *rand.Rand) *zipfGroups {
	z := &zipfGroups{cdf: make([]float64, w.Groups), perPhase: (w.Requests + w.Phases - 1) / w.Phases}
	sum := 0.0
	for k := range z.cdf {
		sum += math.Pow(float64(k+1), -w.ZipfS)
		z.cdf[k] = sum
	}
	for k := range z.cdf {
		z.cdf[k] /= sum
	}
	for p := 0; p < w.Phases; p++ {
		z.perms = append(z.perms, r.Perm(w.Groups))
	}
	return z
}

// group returns the group of request i for a uniform draw u in [0, 1).
func (z *zipfGroups) group(i int, u float64) int {
	rank, _ := slices.BinarySearch(z.cdf, u)
	rank = min(rank, len(z.cdf)-1)
	return z.perms[min(i/z.perPhase, len(z.perms)-1)][rank]
}
