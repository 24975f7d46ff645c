package server

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
)

// Several models behind one simulated server (Config.ExtraModels).
//
// What is modelled. One vLLM process serves one model: its
// --served-model-name aliases share one KV cache, and its LoRA adapters
// travel inside the events (lora_id, lora_name) on the process's single
// topic (KVEventsConfig.topic, kv@<ip:port>@<model> by llm-d's
// convention). An address that serves two different models is therefore
// several engines behind one front: a pod whose proxy dispatches on the
// body's model field to one engine process per model. The simulated server
// models that pod: each extra model gets an engine of its own (its own
// block pool, prefix cache and scheduler, configured like Config.Engine,
// hashing blocks exactly as the first one does — two vLLM processes with
// sha256_cbor and the same seed give identical tokens identical block
// hashes), and one KV-event publisher carries every engine's batches, each
// on its own model's topic kv@<ip:port>@<model>, under one sequence, so a
// subscriber sees one stream with messages of several topics. The replay
// buffer keeps each batch's topic, and a snapshot_endpoint answers with
// each model's blocks after its topic frame (kvroute's extension of vLLM's
// snapshot protocol, whose chunks carry no model; package
// kvevents/snapshot). Only the first engine registers the vllm:* metrics
// (its model's load; the extra engines' are not exported), and a
// prefill/decode role is refused with extra models.

// modelSel is what a request's model name selects: the engine serving it
// and, on the base model's engine, a LoRA adapter.
type modelSel struct {
	eng    *simengine.Engine
	lora   string
	loraID int
}

// checkExtraModels validates Config.ExtraModels before anything starts.
func checkExtraModels(cfg *Config) error {
	if len(cfg.ExtraModels) == 0 {
		return nil
	}
	for i, m := range cfg.ExtraModels {
		if m == "" || m == cfg.Model || slices.Contains(cfg.LoRAModules, m) || slices.Contains(cfg.ExtraModels[:i], m) {
			return fmt.Errorf("simengine: bad extra model name %q (empty, repeated, or the model's or an adapter's)", m)
		}
	}
	switch {
	case cfg.PD.Role != "" && cfg.PD.Role != RoleBoth:
		return errors.New("simengine: extra models are not simulated with a prefill/decode role")
	case cfg.KVEvents.Active():
		if _, model, ok := wire.ParseTopic([]byte(cfg.KVEvents.Topic)); !ok || model != cfg.Model {
			return fmt.Errorf("simengine: extra models need the topic kv@<ip:port>@%s to derive theirs (got %q)", cfg.Model, cfg.KVEvents.Topic)
		}
	}
	return nil
}

// startExtraEngines starts one engine per extra model, publishing on its
// model's topic through the server's publisher.
func (s *Server) startExtraEngines(ec simengine.Config, format wire.Format) error {
	if len(s.cfg.ExtraModels) == 0 {
		return nil
	}
	s.extra = make(map[string]*simengine.Engine, len(s.cfg.ExtraModels))
	var id string
	if s.pub != nil {
		id, _, _ = wire.ParseTopic([]byte(s.cfg.KVEvents.Topic))
	}
	for _, m := range s.cfg.ExtraModels {
		c := ec
		c.Model, c.Sink = m, nil
		if s.pub != nil {
			topic := wire.AppendTopic(nil, id, m)
			s.pub.addSnapshotTopic(topic, format)
			c.Sink = topicSink{p: s.pub, topic: topic}
		}
		eng, err := simengine.NewRealTime(c, simengine.Options{Set: telemetry.Set{Logger: s.lg}})
		if err != nil {
			s.closeExtraEngines()
			return fmt.Errorf("simengine: engine of model %q: %w", m, err)
		}
		s.extra[m] = eng
	}
	return nil
}

// closeExtraEngines stops the extra models' engines.
func (s *Server) closeExtraEngines() {
	for _, e := range s.extra {
		e.Close()
	}
}

// engines returns every engine of the server, the base model's first.
func (s *Server) engines() []*simengine.Engine {
	out := []*simengine.Engine{s.eng}
	for _, m := range s.cfg.ExtraModels {
		out = append(out, s.extra[m])
	}
	return out
}

// ModelEngine returns the engine serving model (the base model's for "",
// Config.Model or one of Config.ServedModelAliases), nil for a model the
// server does not serve.
func (s *Server) ModelEngine(model string) *simengine.Engine {
	if s.isBaseName(model) {
		return s.eng
	}
	return s.extra[model]
}

// topicSink publishes an engine's batches on topic through the server's
// one publisher (one sequence for every topic).
type topicSink struct {
	p     *EventPublisher
	topic []byte
}

func (t topicSink) PublishKVEvents(b simengine.EventBatch) { t.p.publishTopic(t.topic, b) }
