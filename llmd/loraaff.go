package llmd

import (
	"slices"

	"github.com/kvroute/kvroute/lora"
)

// loraScorer is llm-d's LoRA affinity plugin type, translated into a
// lora.Config. It takes no parameters.
const loraScorer = "lora-affinity-scorer"

// Notes of the LoRA translation.
const (
	noteLoRA = "kvroute's LoRA adapter affinity is package lora's scorer (kvroute-epp --lora-config: weight, capPenalty, maxWaiting; " +
		"it reads each engine's vllm:lora_requests_info through the engine metrics scraper, --engine-metrics-config or its defaults). " +
		"llm-d's scorer gives 1 where the adapter runs, 0.8 where a slot is free, 0.6 where it waits and 0 at capacity; " +
		"kvroute's gives 1 where it runs, 0.7 where it waits (it is already on its way into the batch, where a load elsewhere is certain), " +
		"0.4 where it would load into a free slot and 0.1 at the max_lora cap (capPenalty 0.3), each load plus a hash spread of at most 0.05 " +
		"so that every replica sends a new adapter to the same engine; an engine without fresh metrics scores 0.4, " +
		"one whose waiting queue reached maxWaiting (5) scores as a load so that a hot adapter spills, " +
		"and a request for the base model scores 0 everywhere (llm-d's rates it as an adapter no engine runs)"
	noteLoRAPD = "under kvroute's P/D profile the LoRA scorer, with one weight, enters both the prefill pick (the router's scorers) and the decode pick (disagg's DecodeScorers, which kvroute-epp and the gateway set)"
)

// translateLoRA turns the first lora-affinity-scorer of staged that a
// scheduling profile kvroute runs references into st.lora: that is the
// first profile, or a P/D handler's decode profile (weights), and under P/D
// the prefill one (pdProfiles[0]). The scorer's weight is its weight in
// weights, else in the prefill profile (a finding when the two differ);
// a zero weight mutes it, as in llm-d. It returns the findings.
func translateLoRA(staged []stagePlugin, profiles []schedulingProfile, weights schedulingProfile, pdProfiles []string, st *stages) ([]Finding, error) {
	var out []Finding
	for _, p := range staged {
		if p.typ != loraScorer {
			continue
		}
		if err := decodeStrict(p.params, &struct{}{}, p.path+".parameters"); err != nil {
			return nil, err // llm-d's scorer takes no parameters
		}
		ref, referenced := profileRef(p.name, weights), false
		for _, prof := range profiles {
			r := profileRef(p.name, prof)
			referenced = referenced || r != nil
			if ref == nil && len(pdProfiles) == 2 && prof.Name == pdProfiles[0] {
				ref = r
			}
		}
		switch {
		case ref == nil && !referenced:
			out = append(out, Finding{Path: p.path, Kind: NotNeeded, Note: "no scheduling profile references it, so llm-d runs it nowhere; kvroute configures no LoRA scorer"})
			continue
		case ref == nil:
			out = append(out, Finding{Path: p.path, Kind: NoEquivalent, Note: "only a scheduling profile kvroute does not run references it; " + noteProfiles})
			continue
		case st.lora != nil:
			out = append(out, Finding{Path: p.path, Kind: Different, Note: "kvroute runs one LoRA scorer, configured by " + st.loraAt})
			continue
		}
		if f, ok := prefillWeight(p.name, profiles, pdProfiles, "kvroute's LoRA scorer enters both picks with one weight,"); ok {
			out = append(out, f)
		}
		cfg := lora.Config{}
		if w := ref.Weight; w != nil {
			switch {
			case *w == 0:
				out = append(out, Finding{Path: p.path, Kind: NotNeeded, Note: "a zero weight mutes the scorer in llm-d; kvroute configures no LoRA scorer"})
				continue
			case *w < 0:
				out = append(out, Finding{Path: p.path, Kind: NoEquivalent, Note: "a negative weight steers requests away from their adapter's engines in llm-d; kvroute's LoRA weight is not negative, so it configures no LoRA scorer"})
				continue
			}
			cfg.Weight = *w
		}
		out = append(out, Finding{Path: p.path, Kind: Different, Note: noteLoRA})
		if st.disagg != nil {
			out = append(out, Finding{Path: p.path, Kind: Different, Note: noteLoRAPD})
		}
		st.lora, st.loraAt = &cfg, p.path
	}
	return out, nil
}

// profileRef returns prof's reference to the plugin named name, nil when it
// has none.
func profileRef(name string, prof schedulingProfile) *profilePlugin {
	i := slices.IndexFunc(prof.Plugins, func(r profilePlugin) bool { return r.PluginRef == name })
	if i < 0 {
		return nil
	}
	return &prof.Plugins[i]
}
