// Command renderload measures how kvroute routes when its renderers
// saturate: simulated vLLM engines whose render routes tokenize on a fixed
// number of workers at a fixed cost per prompt token (simengine/server's
// RenderWorkers and RenderTokenCost) receive requests at a fixed offered
// rate, as a multiple of what the renderers can render, through a
// kvroute.Router that renders on them. For the render client as it was (no
// concurrency limit, no hedging) and with its defaults, it reports the
// requests routed per second, the share routed with the prompt's tokens
// (the rest route by load alone, without cache information), the time spent
// in Pick, and the renders the renderers worked on after their client had
// gone.
//
//	go run ./bench/cmd/renderload                  # writes out/renderload/renderload.md
//	go run ./bench/cmd/renderload -duration 30s -loads 0.5,1,2,4
package main
