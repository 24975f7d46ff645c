package sim

import (
	"time"

	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/simengine"
)

// eventPath carries the engines' KV events to the router's index the way a
// deployment does, minus the socket: each engine step's event batch is
// encoded in the current vLLM wire format (wire.AppendBatch), held for
// the configured delay, then decoded (wire.Decoder) and applied
// (kvevents.Applier) for the engine's endpoint — once per subscriber (every
// gateway replica of an event-fed policy subscribes to every engine).
type eventPath struct {
	delay        time.Duration
	ids          []string
	queue        timeQueue[delivery]
	enc          wire.Batch
	dec          *wire.Decoder
	batch        wire.Batch
	subs         []eventSub           // one per gateway replica
	totals       kvevents.ApplyResult // of replica 0
	decodeErrors int
	ignoreGroups bool // Config.IgnoreCacheGroups
}

// eventSub is one subscriber of the event path: the applier of its index
// and, optionally, a hook that sees each decoded batch too.
type eventSub struct {
	applier *kvevents.Applier
	onBatch func(endpoint int, b *wire.Batch)
}

// delivery is one encoded batch in flight to the router.
type delivery struct {
	endpoint int
	payload  []byte
}

// publish encodes one engine batch and schedules its delivery.
func (p *eventPath) publish(endpoint int, b simengine.EventBatch) {
	p.enc.Reset()
	for i := range b.Events {
		toWire(&p.enc, &b.Events[i])
	}
	payload := wire.AppendBatch(nil, &p.enc, wire.FormatVLLM)
	p.queue.push(b.Time.Add(p.delay), delivery{endpoint: endpoint, payload: payload})
}

// next returns the time of the next delivery.
func (p *eventPath) next() (time.Time, bool) {
	return p.queue.next()
}

// deliver applies every batch due at or before now, in order.
func (p *eventPath) deliver(now time.Time) {
	for {
		d, ok := p.queue.popDue(now)
		if !ok {
			return
		}
		if err := p.dec.Decode(d.payload, &p.batch); err != nil {
			p.decodeErrors++
			continue
		}
		if p.ignoreGroups {
			dropCacheGroups(&p.batch)
		}
		for _, s := range p.subs {
			if s.onBatch != nil {
				s.onBatch(d.endpoint, &p.batch)
			}
		}
		for _, s := range p.subs[1:] {
			s.applier.Apply(p.ids[d.endpoint], simModel, &p.batch)
		}
		r := p.subs[0].applier.Apply(p.ids[d.endpoint], simModel, &p.batch)
		p.totals.Stored += r.Stored
		p.totals.StoredBlocks += r.StoredBlocks
		p.totals.Removed += r.Removed
		p.totals.RemovedBlocks += r.RemovedBlocks
		p.totals.Cleared += r.Cleared
		p.totals.Skipped += r.Skipped
		p.totals.Dropped += r.Dropped
		p.totals.ParentMissing += r.ParentMissing
	}
}

// toWire appends the kvevents form of one engine event to b.
func toWire(b *wire.Batch, e *simengine.Event) {
	b.Events = append(b.Events, wire.Event{})
	w := &b.Events[len(b.Events)-1]
	switch e.Type {
	case simengine.BlockStored:
		w.Type = wire.EventBlockStored
	case simengine.BlockRemoved:
		w.Type = wire.EventBlockRemoved
	case simengine.AllBlocksCleared:
		w.Type = wire.EventAllBlocksCleared
		return
	}
	w.BlockHashes = e.BlockHashes
	w.ParentHash, w.HasParent = e.ParentHash, e.HasParent
	w.TokenIDs = e.TokenIDs
	w.BlockSize = e.BlockSize
	w.Medium = e.Medium
	w.LoRAName = e.LoRAName
	if e.LoRAName != "" {
		w.LoRAID, w.HasLoRAID = int64(e.LoRAID), true
	}
	w.Group, w.HasGroup = e.GroupIdx, true
	if e.SlidingWindow > 0 { // a hybrid engine's window group
		w.SlidingWindow, w.HasSlidingWindow = int64(e.SlidingWindow), true
	}
	w.Kind = e.Kind
	for _, keys := range e.ExtraKeys {
		var ks []wire.ExtraKey
		for _, k := range keys {
			ks = append(ks, k.Wire())
		}
		w.ExtraKeys = append(w.ExtraKeys, ks)
	}
	if len(w.ExtraKeys) > 0 && allEmpty(w.ExtraKeys) {
		w.ExtraKeys = nil // vLLM sends extra_keys: None when no block has any
	}
}

func allEmpty(keys [][]wire.ExtraKey) bool {
	for _, k := range keys {
		if len(k) > 0 {
			return false
		}
	}
	return true
}
