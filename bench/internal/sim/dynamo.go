package sim

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/kvroute/kvroute/kvindex"
)

// dynamoWorker is what Dynamo's cost model knows about one worker for one
// request, all in KV blocks.
type dynamoWorker struct {
	// InflightPrefill is the prompt blocks already routed to the worker and
	// not yet prefilled; Prompt is this request's prompt blocks.
	InflightPrefill, Prompt float64
	// Device, Host and Disk are this prompt's blocks the worker holds per
	// tier (contiguous from block 0).
	Device, Host, Disk float64
	// Active is the worker's active KV blocks; New the blocks this request
	// adds to them.
	Active, New float64
	// Decay scales the device credit (1 without overlap-credit decay).
	Decay float64
}

// dynamoCost is Dynamo's cost of sending the request to w:
//
//	credits  = OverlapScoreCredit × Decay × Device + HostCacheHitWeight × Host + DiskCacheHitWeight × Disk
//	prefill  = max(InflightPrefill + Prompt − credits, 0)
//	cost     = PrefillLoadScale × prefill + Active + New
func dynamoCost(c DynamoConfig, w dynamoWorker) float64 {
	credits := c.OverlapScoreCredit*w.Decay*w.Device + c.HostCacheHitWeight*w.Host + c.DiskCacheHitWeight*w.Disk
	prefill := math.Max(w.InflightPrefill+w.Prompt-credits, 0)
	return c.PrefillLoadScale*prefill + w.Active + w.New
}

// dynamoDecay returns each worker's device-credit factor under
// overlap-credit decay: 1 / (1 + decay × excess ÷ request blocks), where
// excess is the worker's prefill backlog above the least-loaded worker's
// (in blocks) and request blocks the prompt's tokens ÷ the block size,
// rounded up, as Dynamo's worker_logit normalises it. All 1 when decay is
// 0 or every backlog is equal.
func dynamoDecay(decay float64, backlog []float64, promptTokens, blockSize int, out []float64) []float64 {
	out = out[:0]
	lo := math.Inf(1)
	for _, b := range backlog {
		lo = math.Min(lo, b)
	}
	req := float64(max((promptTokens+blockSize-1)/blockSize, 1))
	for _, b := range backlog {
		f := 1.0
		if decay > 0 && b > lo {
			f = 1 / (1 + decay*(b-lo)/req)
		}
		out = append(out, f)
	}
	return out
}

// dynamoSelect picks the lowest cost (ties at random) at temperature 0, or
// samples a softmax over the negated costs min-max normalised to [0, 1]
// divided by the temperature.
func dynamoSelect(costs []float64, temperature float64, rng *rand.Rand) int {
	if temperature <= 0 {
		best, ties := 0, 1
		for i := 1; i < len(costs); i++ {
			switch {
			case costs[i] < costs[best]:
				best, ties = i, 1
			case costs[i] == costs[best]:
				ties++
				if rng.IntN(ties) == 0 {
					best = i
				}
			}
		}
		return best
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range costs {
		lo, hi = math.Min(lo, c), math.Max(hi, c)
	}
	span := hi - lo
	if span == 0 {
		return rng.IntN(len(costs))
	}
	sum := 0.0
	w := make([]float64, len(costs))
	for i, c := range costs {
		w[i] = math.Exp(-(c - lo) / span / temperature)
		sum += w[i]
	}
	x := rng.Float64() * sum
	for i := range w {
		if x -= w[i]; x < 0 {
			return i
		}
	}
	return len(costs) - 1
}

// dynamo is the Dynamo KV router as the simulation runs it. Its index of
// cached blocks is fed by the engines' events (the same deliveries kvroute
// gets, into a kvindex of its own: Dynamo's radix tree is exact too); a
// side index of its own decisions ("predicted" blocks, PredictedTTL)
// covers the time before those events arrive, each worker's device overlap
// being the larger of the two. Its load view is its own: prefill tokens of
// the requests it routed that have not produced a first token, and the
// distinct KV blocks of the requests it routed that are still running
// (their prompt blocks; Dynamo does not know the output length in advance).
type dynamo struct {
	cfg       DynamoConfig
	bs        int
	ix        *kvindex.Index
	ids       []string
	now       func() time.Time
	predicted map[approxKey]int64 // expiry, ns of virtual time
	prefill   []int64             // in-flight prefill tokens per worker
	active    []map[kvindex.Key]int32
	keys      []kvindex.Key
	match     kvindex.MatchResult
	backlog   []float64
	decay     []float64
	costs     []float64
	device    []int
	rng       *rand.Rand
	picks     int
}

func newDynamo(cfg Config, ids []string, ix *kvindex.Index, now func() time.Time, seed uint64) *dynamo {
	n := len(ids)
	d := &dynamo{
		cfg: cfg.Peers.Dynamo, bs: cfg.Fleet.BlockSize, ix: ix, ids: ids, now: now,
		predicted: map[approxKey]int64{}, prefill: make([]int64, n), active: make([]map[kvindex.Key]int32, n),
		costs: make([]float64, n), device: make([]int, n), backlog: make([]float64, n), rng: rand.New(rand.NewPCG(seed, 0xd1)),
	}
	for i := range d.active {
		d.active[i] = map[kvindex.Key]int32{}
	}
	return d
}

func (d *dynamo) pick(rq *request) (int, error) {
	now := d.now().UnixNano()
	d.keys = keysOf(d.keys, rq.prompt, d.bs)
	d.ix.Match(d.keys, d.ids, &d.match)
	bs := float64(d.bs)
	prompt := float64(len(rq.prompt)) / bs
	for i := range d.ids {
		d.backlog[i] = float64(d.prefill[i]) / bs
	}
	d.decay = dynamoDecay(d.cfg.OverlapCreditDecay, d.backlog, len(rq.prompt), d.bs, d.decay)
	device := d.device
	for i := range d.ids {
		m := d.match.At(i)
		device[i] = max(m.GPU, d.predictedOverlap(i, now))
		fresh := 0
		for _, k := range d.keys {
			if d.active[i][k] == 0 {
				fresh++
			}
		}
		d.costs[i] = dynamoCost(d.cfg, dynamoWorker{
			InflightPrefill: d.backlog[i], Prompt: prompt,
			Device: float64(device[i]), Host: float64(max(m.CPU-device[i], 0)), Disk: float64(max(m.Storage-max(device[i], m.CPU), 0)),
			Active: float64(len(d.active[i])), New: float64(fresh), Decay: d.decay[i],
		})
	}
	best := dynamoSelect(d.costs, d.cfg.Temperature, d.rng)
	rq.prefillTokens = max(int64(len(rq.prompt))-int64(device[best]*d.bs), 0)
	d.prefill[best] += rq.prefillTokens
	rq.blocks = append(rq.blocks[:0], d.keys...)
	for _, k := range rq.blocks {
		d.active[best][k]++
	}
	if d.cfg.PredictedTTL > 0 {
		exp := now + int64(d.cfg.PredictedTTL)
		for _, k := range d.keys {
			d.predicted[approxKey{k, int32(best)}] = exp
		}
		if d.picks++; d.picks%4096 == 0 {
			for k, e := range d.predicted {
				if e <= now {
					delete(d.predicted, k)
				}
			}
		}
	}
	return best, nil
}

// predictedOverlap is the contiguous prefix of the request the side index
// says worker i was recently sent.
func (d *dynamo) predictedOverlap(i int, now int64) int {
	n := 0
	for _, k := range d.keys {
		if e, ok := d.predicted[approxKey{k, int32(i)}]; !ok || e <= now {
			break
		}
		n++
	}
	return n
}

func (d *dynamo) firstToken(rq *request) {
	d.prefill[rq.engine] -= rq.prefillTokens
	rq.prefillTokens = 0
}

func (d *dynamo) done(rq *request) {
	d.firstToken(rq)
	m := d.active[rq.engine]
	for _, k := range rq.blocks {
		if m[k]--; m[k] <= 0 {
			delete(m, k)
		}
	}
	rq.blocks = nil
}

func (d *dynamo) close() { d.ix.Close() }
