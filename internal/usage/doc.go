// Package usage reads the cached prompt tokens an engine reports in a
// response's usage, as the bytes of the response go by, for the kvroute
// gateway and the Envoy endpoint picker (contrib/extproc): both end a
// request with that count (kvroute.DoneInfo.CachedTokens), which closes the
// router's accuracy loop (the index's prediction against what the engine
// actually reused).
//
// A Scanner reads a whole JSON body, or every data line of a server-sent
// event stream, and keeps at most MaxBytes of either at a time. Its buffer
// may be charged to a shared byte budget (bytebudget.Budget), so that many
// responses read at once hold no more memory than the budget; a response
// whose buffer finds no room is passed over and counted as NoRoom.
//
// vLLM reports the count as OpenAI's usage.prompt_tokens_details.cached_tokens
// (completions, chat completions; only when started with
// --enable-prompt-tokens-details), the Responses API's
// usage.input_tokens_details.cached_tokens (also inside the
// response.completed event of a stream) and Anthropic's
// usage.cache_read_input_tokens (Messages). A stream carries usage only when
// the client asked for stream_options.include_usage.
package usage
