package gateway

import (
	"github.com/kvroute/kvroute/internal/tokenin"
	"github.com/kvroute/kvroute/render"
)

// GeneratePath is vLLM's token-in, token-out generation route
// (/inference/v1/generate, registered with --enable-scale-out or in
// vLLM's tokens-only mode). Its body is vLLM's GenerateRequest: the prompt
// as token_ids (already rendered, multimodal placeholders expanded), its
// multimodal features (mm_hashes and mm_placeholders by modality), the
// sampling parameters, model (a LoRA adapter's name routes to it), stream,
// cache_salt, priority and kv_transfer_params. It answers token IDs, not
// text. The gateway routes such a request by its own token_ids, features
// and cache salt, without rendering anything, and forwards the body
// unchanged: a client that renders by itself reaches the cache-warm engine
// with no tokenizer on the path. A body with raw media in content_parts
// (which the engine resolves, expanding placeholders within token_ids) is
// routed by load alone (render.Prompt.RawMedia).
const GeneratePath = tokenin.Path

// apiGenerate labels GeneratePath's requests in the gateway's metrics.
const apiGenerate render.API = "generate"

// generatePrompt reads the prompt of a GenerateRequest body (package
// tokenin states how).
func generatePrompt(body []byte) (render.Prompt, string, error) { return tokenin.Prompt(body) }
