// Package tokenin reads the body of vLLM's token-in, token-out generate
// request (/inference/v1/generate, vLLM's GenerateRequest) into the prompt
// a kvroute.Request carries already rendered: its token IDs, multimodal
// features and cache salt (or whether its content_parts give raw media the
// engine resolves itself), read as vLLM's request model reads them. The
// kvroute gateway and the Envoy endpoint picker (contrib/extproc) route
// such a request by what Prompt returns, without rendering anything.
package tokenin
