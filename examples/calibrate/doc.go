// Command calibrate measures the peak prefill throughput of a model-server
// deployment for kvroute's affinity filter and prints
//
//	PEAK_PREFILL_THROUGHPUT=<tokens per second>
//
// It sends --warmup and then --measurements sequential completions requests,
// each a prompt of exactly --chunk-size random token IDs (so every one misses
// the prefix cache and pays a full prefill), to an OpenAI-compatible endpoint:
//
//	POST <url>/v1/completions
//	{"model": <model>, "prompt": [<token IDs>], "max_tokens": 1, "stream": true}
//
// and records the time from sending the request to the first server-sent
// "data:" event (response headers and SSE comments do not count). The result
// is --chunk-size / median TTFT over the measurements (affinity.
// PeakPrefillThroughput); copy it into the filter configuration
// ("peakPrefillThroughput") and restart the router: the command only measures.
//
// Usage:
//
//	calibrate --url http://10.0.0.1:8000 --model Qwen/Qwen3-32B [--chunk-size 8192]
//	          [--warmup 5] [--measurements 20] [--timeout 2m]
//	          [--min-token-id 1000] [--max-token-id 30000]
//
// --url is the endpoint's base URL (a path ending in /v1/completions is used
// as is); send through the router or straight to one engine, to an otherwise
// idle deployment. --chunk-size must equal the engine's effective
// --max-num-batched-tokens (vLLM default 8192; 2048 on CPU vLLM); a mismatch
// gives a silently wrong number. Token IDs are drawn uniformly from
// [--min-token-id, --max-token-id), which must lie inside the model's
// vocabulary; the defaults avoid the low IDs where vocabularies keep special
// tokens and fit every common vocabulary of 32K tokens or more. --timeout
// bounds each request. Progress goes to standard error, the result to standard
// output. Re-measure whenever tensor parallelism, chunk size, quantization,
// max model length, the engine or its version changes.
package main
