package server

import (
	"fmt"
	"slices"
)

// Several names of the one base model (Config.ServedModelAliases).
//
// What is modelled. vLLM's --served-model-name takes one or more names and
// serves the one model (--model) under each: every name is a base model
// path of its own with the same model path, so GET /v1/models gives one
// card per name, in the order given, each with that name as id and the
// same root (the model path) and max_model_len; the LoRA adapters' cards
// follow, parented on their base_model_name or else on the first name. A
// request naming any of the names is a base-model request, and all names
// run on the one engine, so they share one KV cache: vLLM's block hashes
// carry no model name, and the same prompt under either name finds the
// same blocks. Responses name the model by the first name whichever name
// the request gave (vLLM's model_name for a request without an adapter),
// in every chunk of a stream too; an adapter's response names the adapter.
// vLLM's Prometheus metrics label model_name with the first name, and the
// KV events go out on the one topic the operator configured (llm-d's
// convention: kv@<ip:port>@<first name>).
//
// In the simulated server Config.Model is the first name, the aliases are
// the names after it, and Config.ModelPath (Model when empty) is the root
// of every base card. The render routes copy the request's model into the
// GenerateRequest they answer unchanged, as vLLM's renderer does; the
// routes that generate answer with the first name.

// checkAliases validates Config.ServedModelAliases before anything starts:
// each alias is a non-empty name given once, neither the model nor an
// adapter's or an extra model's name (a request naming it would otherwise
// select two things).
func checkAliases(cfg *Config) error {
	for i, a := range cfg.ServedModelAliases {
		switch {
		case a == "":
			return fmt.Errorf("simengine: served model alias %d is empty", i)
		case a == cfg.Model:
			return fmt.Errorf("simengine: served model alias %q is the model's own name", a)
		case slices.Contains(cfg.ServedModelAliases[:i], a):
			return fmt.Errorf("simengine: served model alias %q is given twice", a)
		case slices.Contains(cfg.LoRAModules, a):
			return fmt.Errorf("simengine: served model alias %q is also a LoRA module's name", a)
		case slices.Contains(cfg.ExtraModels, a):
			return fmt.Errorf("simengine: served model alias %q is also an extra model's name", a)
		}
	}
	return nil
}

// isBaseName reports whether a request naming name is a request for the
// base model: an empty name, Config.Model or one of its aliases.
func (s *Server) isBaseName(name string) bool {
	return name == "" || name == s.cfg.Model || slices.Contains(s.cfg.ServedModelAliases, name)
}

// modelName is the model a generating route's response reports, as vLLM
// reports it: the first served name (Config.Model) for the base model
// under any of its names, else the request's own (an adapter's or an
// extra model's name).
func (s *Server) modelName(req string) string {
	if s.isBaseName(req) {
		return s.cfg.Model
	}
	return req
}

// renderedModel is the model a render route writes into its
// GenerateRequest: the request's own name, an alias included (vLLM's
// renderer copies it), the first served name when the request gave none.
func (s *Server) renderedModel(req string) string {
	if req == "" {
		return s.cfg.Model
	}
	return req
}
