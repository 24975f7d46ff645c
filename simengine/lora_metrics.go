package simengine

import "github.com/prometheus/client_golang/prometheus"

// loraCollector exports vllm:lora_requests_info as vLLM does: a gauge
// without model_name or engine labels (vLLM refuses LoRA with several
// data-parallel engines per server), one series per combination of
// running_lora_adapters, waiting_lora_adapters and max_lora ever reported,
// each valued at the time it was last set (Unix seconds). vLLM keeps every
// combination; the engine keeps the newest maxLoRASeries. It also exports
// simengine_lora_loads_total and simengine_lora_evictions_total, which vLLM
// has no counterpart of, for measurements.
type loraCollector struct {
	e                      *Engine
	info, loads, evictions *prometheus.Desc
}

func newLoRACollector(e *Engine) *loraCollector {
	return &loraCollector{
		e: e,
		info: prometheus.NewDesc("vllm:lora_requests_info", "Running stats on lora requests.",
			[]string{"max_lora", "waiting_lora_adapters", "running_lora_adapters"}, nil),
		loads: prometheus.NewDesc("simengine_lora_loads_total",
			"Adapters the simulated engine loaded into a slot (each stalled its step by the load time).", nil, nil),
		evictions: prometheus.NewDesc("simengine_lora_evictions_total",
			"Adapters the simulated engine evicted from a slot to load another.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *loraCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.info
	ch <- c.loads
	ch <- c.evictions
}

// Collect implements prometheus.Collector.
func (c *loraCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.e.LoRASeries() {
		if m, err := prometheus.NewConstMetric(c.info, prometheus.GaugeValue, s.Value, s.MaxLoRA, s.Waiting, s.Running); err == nil {
			ch <- m
		}
	}
	st := c.e.Stats()
	ch <- prometheus.MustNewConstMetric(c.loads, prometheus.CounterValue, float64(st.LoRALoads))
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(st.LoRAEvictions))
}

// loraCollectors registers the engine's collector and its LoRA collector
// as one, so the engine's single unregister removes both.
type loraCollectors [2]prometheus.Collector

// Describe implements prometheus.Collector.
func (c loraCollectors) Describe(ch chan<- *prometheus.Desc) {
	c[0].Describe(ch)
	c[1].Describe(ch)
}

// Collect implements prometheus.Collector.
func (c loraCollectors) Collect(ch chan<- prometheus.Metric) {
	c[0].Collect(ch)
	c[1].Collect(ch)
}
