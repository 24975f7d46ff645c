// Package modelcard holds vLLM's ModelPermission, the one entry vLLM puts
// in the "permission" list of every card of its GET /v1/models answer, for
// the two places kvroute writes such a list: the gateway's own model list
// (multi-model mode) and the simulated engine's.
//
// vLLM fills every permission with fixed defaults (no engine creation,
// sampling, log probabilities and viewing allowed, no search indices or
// fine-tuning, organization "*", no group, not blocking), a fresh ID
// ("modelperm-" and 32 hex digits) and the time of the answer. No client
// acts on it; it is there so that a client which decodes vLLM's list
// strictly decodes kvroute's the same.
package modelcard
