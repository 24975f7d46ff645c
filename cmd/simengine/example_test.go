package main

import "fmt"

// The simengine command takes vLLM's flags; this is how a
// --kv-events-config with replay and a llm-d topic is understood.
func Example_flags() {
	o, err := parseFlags([]string{"--model", "my-model", "--port", "8001", "--enable-scale-out",
		"--kv-events-config", `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5556","replay_endpoint":"tcp://*:5559","topic":"kv@127.0.0.1:8001@my-model"}`})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("model:", o.cfg.Model, "port:", o.port, "render routes:", o.cfg.EnableScaleOut)
	fmt.Println("events:", o.cfg.KVEvents.Active(), *o.cfg.KVEvents.ReplayEndpoint)
	// Output:
	// model: my-model port: 8001 render routes: true
	// events: true tcp://*:5559
}
