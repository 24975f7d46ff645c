package wire_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
)

func TestParseTopic(t *testing.T) {
	cases := []struct {
		topic           string
		endpoint, model string
		ok              bool
	}{
		{"kv@10.0.0.1@m", "10.0.0.1", "m", true},
		{"kv@10.0.0.1:8000@meta-llama/Llama-3.1-8B", "10.0.0.1:8000", "meta-llama/Llama-3.1-8B", true},
		{"kv@10.0.0.1:8000@org/model@v2", "10.0.0.1:8000", "org/model@v2", true},
		{"kv@10.0.0.1@", "10.0.0.1", "", true},
		{"", "", "", false},
		{"\x00sgl-kv-epoch=3", "", "", false},
		{"kv@10.0.0.7@my-model\x00sgl-kv-epoch=1700000000", "10.0.0.7", "my-model", true},
		{"kv@10.0.0.7@my-model\x00sgl-kv-epoch=1\x00sgl-kv-snapshot=9", "10.0.0.7", "my-model", true},
		{"pod-a", "pod-a", "", true},
		{"kv@pod-a", "kv@pod-a", "", true},
		{"kv@@m", "", "m", false},
	}
	for _, c := range cases {
		ep, model, ok := wire.ParseTopic([]byte(c.topic))
		require.Equal(t, c.ok, ok, "%q", c.topic)
		require.Equal(t, c.endpoint, ep, "%q", c.topic)
		require.Equal(t, c.model, model, "%q", c.topic)
	}
}

// TestTopicEpoch: SGLang's epoch is read from the live topic (with or
// without a barrier after it), a barrier is told apart from an ordinary
// batch, and a topic without an epoch (vLLM's, SGLang's without
// snapshots) has none.
func TestTopicEpoch(t *testing.T) {
	cases := []struct {
		topic, epoch string
		barrier      bool
	}{
		{"kv@10.0.0.7@m\x00sgl-kv-epoch=0f1e2d3c4b5a69788796a5b4c3d2e1f0", "0f1e2d3c4b5a69788796a5b4c3d2e1f0", false},
		{"\x00sgl-kv-epoch=replica-epoch-1", "replica-epoch-1", false},
		{"kv@10.0.0.7@m\x00sgl-kv-epoch=e1\x00sgl-kv-snapshot=9b", "e1", true},
		{"kv@10.0.0.7@m", "", false},
		{"", "", false},
		{"kv@10.0.0.7@m\x00sgl-kv-epoch=", "", false},
		{"kv@10.0.0.7@m\x00sgl-kv-snapshot=9b", "", true},
		{"kv@10.0.0.7@m\x00other", "", false},
	}
	for _, c := range cases {
		epoch, barrier := wire.TopicEpoch([]byte(c.topic))
		require.Equal(t, c.epoch, string(epoch), "%q", c.topic)
		require.Equal(t, c.epoch == "", epoch == nil, "%q: no epoch is nil", c.topic)
		require.Equal(t, c.barrier, barrier, "%q", c.topic)
	}
}

func TestAppendTopicRoundTrip(t *testing.T) {
	topic := wire.AppendTopic(nil, "10.0.0.1", "m")
	require.Equal(t, "6b764031302e302e302e31406d", hexString(topic), "frame 0 is the topic as UTF-8 bytes")
	ep, model, ok := wire.ParseTopic(wire.AppendTopic(nil, "10.0.0.1:8000", "a@b@c"))
	require.True(t, ok)
	require.Equal(t, "10.0.0.1:8000", ep)
	require.Equal(t, "a@b@c", model)
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// FuzzParseTopic: ParseTopic never panics, never returns text from after a
// NUL, and reads back what AppendTopic writes; TopicEpoch never returns an
// empty epoch or one that runs past a NUL.
func FuzzParseTopic(f *testing.F) {
	f.Fuzz(func(t *testing.T, topic []byte) {
		ep, model, ok := wire.ParseTopic(topic)
		if ok && ep == "" {
			t.Fatal("ok with an empty endpoint")
		}
		if strings.ContainsRune(ep, 0) || strings.ContainsRune(model, 0) {
			t.Fatal("NUL suffix not stripped")
		}
		if ok && strings.Contains(model, "@") && strings.Count(string(topic), "@") < 3 {
			t.Fatal("model with '@' from fewer than three separators")
		}
		if epoch, _ := wire.TopicEpoch(topic); epoch != nil && (len(epoch) == 0 || strings.ContainsRune(string(epoch), 0)) {
			t.Fatal("an epoch is never empty and ends at the next NUL")
		}
		if ep == "" || strings.ContainsAny(ep, "@\x00") || strings.ContainsRune(model, 0) {
			return
		}
		ep2, model2, ok2 := wire.ParseTopic(wire.AppendTopic(nil, ep, model))
		if !ok2 || ep2 != ep || model2 != model {
			t.Fatalf("round trip of %q/%q gave %q/%q", ep, model, ep2, model2)
		}
	})
}
