package sim

import (
	"time"

	"github.com/kvroute/kvroute/kvindex"
)

// pdDynamo is Dynamo's conditional disaggregation (DynamoDisaggConfig):
// its KV-router cost model (dynamo.go, Dynamo's defaults) picks the decode
// worker among the decode pool, the decision reads that worker's device
// overlap from the same pick, and the prefill worker is Dynamo's cost
// model over the prefill pool. What is modelled: the isl_or_load predicate
// and its defaults; the prefill pick's busy signal as a peek at the
// worker the prefill router would choose; the decode worker's prefill
// tokens are not counted once the request is split (Dynamo's decode stage
// in disaggregated mode does not track prefill tokens). Not modelled: the
// decode-busy veto (off by default) and the router queue itself (this
// study has no gateway queue for any policy).
type pdDynamo struct {
	cfg      DynamoDisaggConfig
	dec, pre *dynamo
	decIdx   []int // pool index → engine index
	preIdx   []int
	limit    float64 // busy line in tokens
}

func newPDDynamo(c PDConfig, ix *kvindex.Index, ids []string, roles []PDRole, now func() time.Time) *pdDynamo {
	var decIDs, preIDs []string
	d := &pdDynamo{cfg: c.Dynamo, limit: c.Dynamo.QueueThreshold * float64(c.Base.Fleet.MaxNumBatchedTokens)}
	for i, r := range roles {
		if r == RolePrefill {
			preIDs, d.preIdx = append(preIDs, ids[i]), append(d.preIdx, i)
		} else {
			decIDs, d.decIdx = append(decIDs, ids[i]), append(d.decIdx, i)
		}
	}
	d.dec = newDynamo(c.Base, decIDs, ix, now, c.Base.Seed)
	d.pre = newDynamo(c.Base, preIDs, ix, now, c.Base.Seed+1)
	return d
}

func (d *pdDynamo) route(rq *pdReq) (int, int, error) {
	rq.dq.prompt, rq.pq.prompt = rq.prompt, rq.prompt
	j, err := d.dec.pick(&rq.dq)
	if err != nil {
		return 0, 0, err
	}
	rq.dq.engine = j
	prompt := len(rq.prompt)
	eff := max(prompt-d.dec.device[j]*d.dec.bs, 0)
	bypass := eff < d.cfg.EffISLThreshold && float64(eff)/float64(max(prompt, 1)) < d.cfg.EffISLRatio
	if !bypass && !d.cfg.NoLoad && d.cfg.QueueThreshold > 0 {
		bypass = float64(d.pre.prefill[d.peek(rq.prompt)]) > d.limit
	}
	if bypass {
		return d.decIdx[j], -1, nil
	}
	d.dec.firstToken(&rq.dq) // no prefill tokens on the decode worker
	k, err := d.pre.pick(&rq.pq)
	if err != nil {
		return 0, 0, err
	}
	rq.pq.engine = k
	return d.decIdx[j], d.preIdx[k], nil
}

// peek returns the prefill worker Dynamo's cost model would choose for
// prompt, without charging it: the lowest cost, ties to the first.
func (d *pdDynamo) peek(prompt []uint32) int {
	p := d.pre
	p.keys = keysOf(p.keys, prompt, p.bs)
	p.ix.Match(p.keys, p.ids, &p.match)
	now := p.now().UnixNano()
	bs := float64(p.bs)
	best, bestCost := 0, 0.0
	for i := range p.ids {
		p.backlog[i] = float64(p.prefill[i]) / bs
	}
	p.decay = dynamoDecay(p.cfg.OverlapCreditDecay, p.backlog, len(prompt), p.bs, p.decay)
	for i := range p.ids {
		m := p.match.At(i)
		dev := max(m.GPU, p.predictedOverlap(i, now))
		c := dynamoCost(p.cfg, dynamoWorker{InflightPrefill: p.backlog[i], Prompt: float64(len(prompt)) / bs,
			Device: float64(dev), Active: float64(len(p.active[i])), New: float64(len(p.keys)), Decay: p.decay[i]})
		if i == 0 || c < bestCost {
			best, bestCost = i, c
		}
	}
	return best
}

func (d *pdDynamo) prefilled(rq *pdReq)  { d.pre.done(&rq.pq) }
func (d *pdDynamo) firstToken(rq *pdReq) { d.dec.firstToken(&rq.dq) }
func (d *pdDynamo) done(rq *pdReq)       { d.dec.done(&rq.dq) }
func (d *pdDynamo) close()               { d.dec.ix.Close() }
