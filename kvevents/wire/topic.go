package wire

import "bytes"

// topicPrefix is the conventional first part of a KV-event topic,
// "kv@<endpoint>@<model>" (the llm-d convention; vLLM's default topic is
// empty).
const topicPrefix = "kv"

// ParseTopic parses frame 0 (the topic) of a live KV-event message into
// the endpoint and the model it names.
//
// Everything from the first NUL byte on is removed first (SGLang with
// snapshots appends "\x00sgl-kv-epoch=<epoch>"). Then:
//   - an empty topic (vLLM's default) yields ok=false: the endpoint identity
//     must come from the connection;
//   - a topic with at least two '@' is split on the first two only, so
//     "kv@10.0.0.1:8000@org/model@v2" gives endpoint "10.0.0.1:8000" and
//     model "org/model@v2" (a model name may contain '@', which breaks
//     llm-d's split-on-every-'@' rule); the prefix is not checked, and an
//     empty endpoint part yields ok=false;
//   - any other topic is taken whole as the endpoint, with an empty model
//     (llm-d's fallback).
//
// When the subscriber knows the endpoint it dialled (per-endpoint mode),
// that identity should win over the topic's (llm-d-router#2233).
func ParseTopic(topic []byte) (endpoint, model string, ok bool) {
	if i := bytes.IndexByte(topic, 0); i >= 0 {
		topic = topic[:i]
	}
	if len(topic) == 0 {
		return "", "", false
	}
	first := bytes.IndexByte(topic, '@')
	if first >= 0 {
		rest := topic[first+1:]
		if second := bytes.IndexByte(rest, '@'); second >= 0 {
			if second == 0 {
				return "", string(rest[1:]), false
			}
			return string(rest[:second]), string(rest[second+1:]), true
		}
	}
	return string(topic), "", true
}

// AppendTopic appends the topic "kv@<endpoint>@<model>" to dst, the form
// ParseTopic reads back, for publishers and simulated engines.
func AppendTopic(dst []byte, endpoint, model string) []byte {
	dst = append(dst, topicPrefix...)
	dst = append(dst, '@')
	dst = append(dst, endpoint...)
	dst = append(dst, '@')
	return append(dst, model...)
}

// SGLang's topic metadata: with its snapshots on, its publisher appends
// the epoch to every live topic, and a snapshot barrier's topic also names
// the barrier.
const (
	topicEpochMarker   = "\x00sgl-kv-epoch="
	topicBarrierMarker = "\x00sgl-kv-snapshot="
)

// TopicEpoch reads what SGLang, with its snapshots on, appends to a live
// topic after the part ParseTopic reads: "\x00sgl-kv-epoch=<epoch>", and
// on a snapshot barrier also "\x00sgl-kv-snapshot=<barrier id>".
//
// epoch (a slice of topic, up to the next NUL; nil when the topic has no
// epoch, or an empty one) names the publisher's lifetime: by default the
// 32 hex digits of a UUID drawn when the publisher starts, unchanged until
// it restarts, so a new epoch is a new engine lifetime whatever the
// sequence says (the publisher identity vLLM's snapshot revision sends as
// publisher_id). barrier reports a barrier batch: an empty batch, with the
// next sequence number, that SGLang publishes where a snapshot was cut,
// not an idle heartbeat (SGLang sends none).
func TopicEpoch(topic []byte) (epoch []byte, barrier bool) {
	barrier = bytes.Contains(topic, []byte(topicBarrierMarker))
	i := bytes.Index(topic, []byte(topicEpochMarker))
	if i < 0 {
		return nil, barrier
	}
	epoch = topic[i+len(topicEpochMarker):]
	if j := bytes.IndexByte(epoch, 0); j >= 0 {
		epoch = epoch[:j]
	}
	if len(epoch) == 0 {
		return nil, barrier
	}
	return epoch, barrier
}
