package wire_test

import (
	"testing"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// FuzzNewFields builds batches carrying the fields of vLLM's snapshot
// revision, TensorRT-LLM and SGLang's map events (publisher identity,
// locality, ownership, session_id, a multimodal key as TensorRT-LLM's
// mm_keys) from arbitrary values, and checks that every format that
// carries a field gives it back unchanged, that PeekHeader agrees with
// Decode, and that the formats without it still decode. The seed corpus is
// in testdata/fuzz/FuzzNewFields.
func FuzzNewFields(f *testing.F) {
	f.Add([]byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf},
		"REMOTE", "lmcache", "sess-1", "STORAGE", "9f86d081884c7d65", int64(2), true)
	f.Add([]byte{}, "", "", "", "", "", int64(0), false)
	d := wire.NewDecoder(wire.Limits{})
	f.Fuzz(func(t *testing.T, pid []byte, locality, ownership, session, medium, mmHash string, offset int64, heartbeat bool) {
		in := wiretest.WantV10Full()
		in.HasPublisherID = len(pid) == 16
		copy(in.PublisherID[:], pid)
		if !in.HasPublisherID {
			in.PublisherID = [16]byte{}
		}
		st, rm := &in.Events[0], &in.Events[1]
		st.Locality, st.Ownership, st.SessionID, st.Medium = locality, ownership, session, medium
		rm.Locality, rm.Ownership = locality, ownership
		if mmHash != "" {
			st.ExtraKeys = [][]wire.ExtraKey{{{Kind: wire.ExtraKeyMM, Value: mmHash, Offset: offset}}, nil}
		}
		if heartbeat {
			in.Events = nil
		}
		for _, fm := range []wire.Format{wire.FormatVLLM, wire.FormatVLLMMapBatch, wire.FormatTRTLLM,
			wire.FormatVLLMLegacy, wire.FormatSGLang, wire.FormatSGLangMap} {
			payload := wire.AppendBatch(nil, in, fm)
			var out wire.Batch
			if err := d.Decode(payload, &out); err != nil {
				t.Fatalf("%v: %v", fm, err)
			}
			h, err := wire.PeekHeader(payload)
			if err != nil || h.Events != len(in.Events) || h.HasPublisherID != out.HasPublisherID || h.PublisherID != out.PublisherID {
				t.Fatalf("%v: PeekHeader %+v, %v disagrees with Decode", fm, h, err)
			}
			if out.IsHeartbeat() != heartbeat {
				t.Fatalf("%v: heartbeat %v, want %v", fm, out.IsHeartbeat(), heartbeat)
			}
			carriesID := fm == wire.FormatVLLM || fm == wire.FormatVLLMMapBatch
			if carriesID && (out.HasPublisherID != in.HasPublisherID || out.PublisherID != in.PublisherID) {
				t.Fatalf("%v: identity %x/%v, want %x/%v", fm, out.PublisherID, out.HasPublisherID, in.PublisherID, in.HasPublisherID)
			}
			if !carriesID && out.HasPublisherID {
				t.Fatalf("%v: an identity the format cannot carry", fm)
			}
			if heartbeat {
				continue
			}
			gs, gr := out.Events[0], out.Events[1]
			if gs.Medium != medium {
				t.Fatalf("%v: medium %q, want %q", fm, gs.Medium, medium)
			}
			switch fm {
			case wire.FormatVLLM, wire.FormatVLLMMapBatch:
				if gs.Locality != locality || gs.Ownership != ownership || gs.SessionID != session ||
					gr.Locality != locality || gr.Ownership != ownership {
					t.Fatalf("%v: fields %q %q %q / %q %q", fm, gs.Locality, gs.Ownership, gs.SessionID, gr.Locality, gr.Ownership)
				}
			case wire.FormatSGLangMap: // SGLang's structs carry session_id only
				if gs.SessionID != session || gs.Locality != "" || gs.Ownership != "" || gr.Locality != "" {
					t.Fatalf("%v: fields %q %q %q / %q", fm, gs.Locality, gs.Ownership, gs.SessionID, gr.Locality)
				}
			case wire.FormatTRTLLM: // TensorRT-LLM's structs carry locality only
				if gs.Locality != locality || gr.Locality != locality || gs.Ownership != "" || gs.SessionID != "" {
					t.Fatalf("%v: fields %q %q %q / %q", fm, gs.Locality, gs.Ownership, gs.SessionID, gr.Locality)
				}
			}
			if mmHash != "" && fm != wire.FormatSGLang && fm != wire.FormatSGLangMap {
				if len(gs.ExtraKeys) == 0 || len(gs.ExtraKeys[0]) != 1 ||
					gs.ExtraKeys[0][0] != (wire.ExtraKey{Kind: wire.ExtraKeyMM, Value: mmHash, Offset: offset}) {
					t.Fatalf("%v: multimodal key %+v", fm, gs.ExtraKeys)
				}
			}
		}
	})
}
