package kvevents

import (
	"encoding/hex"
	"hash/fnv"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// topicMeta is what a live message's topic tells of its publisher besides
// the endpoint and model: SGLang's epoch as a publisher identity, and
// whether the message is one of its snapshot barriers. Sources compute it
// once per topic (wire.TopicEpoch) and hand it to the stream with each
// message of that topic.
type topicMeta struct {
	// epoch is the identity of the publisher lifetime the topic's epoch
	// names (nil without one): unlike vLLM's publisher_id it comes with
	// no idle heartbeats, so its publisher is not judged by its silence.
	epoch *[16]byte
	// barrier: the message is an empty batch SGLang publishes where a
	// snapshot was cut, not an idle heartbeat.
	barrier bool
}

// topicMetaOf reads the SGLang epoch and barrier of a live topic.
func topicMetaOf(topic []byte) topicMeta {
	epoch, barrier := wire.TopicEpoch(topic)
	if epoch == nil {
		return topicMeta{barrier: barrier}
	}
	return topicMeta{epoch: epochIdentity(epoch), barrier: barrier}
}

// epochIdentity maps an SGLang epoch to the 16-byte identity a stream
// keeps for its publisher: the UUID itself when the epoch is 32 hex digits
// (SGLang's default, uuid4().hex), so the status shows the epoch SGLang
// logs; otherwise (an epoch the operator chose) its FNV-128a hash, which
// is only ever compared with the next epoch's.
func epochIdentity(epoch []byte) *[16]byte {
	id := new([16]byte)
	if len(epoch) == 2*len(id) {
		if _, err := hex.Decode(id[:], epoch); err == nil {
			return id
		}
	}
	h := fnv.New128a()
	_, _ = h.Write(epoch)
	h.Sum(id[:0])
	return id
}
