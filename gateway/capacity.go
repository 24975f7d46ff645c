package gateway

import (
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/enginemetrics"
)

// CapacityScrapeInterval is how often the engines' metrics are scraped
// when only the approximate index's capacities read them (no admission,
// no lora scorer, no ServerConfig.EngineMetrics): an engine's cache size
// changes only when it restarts.
const CapacityScrapeInterval = 5 * time.Second

// scraperCapacities adapts the engine-metrics scraper to the approximate
// index's capacity source: each endpoint's last successfully scraped
// vllm:cache_config_info, with the time of that scrape (the index judges
// its age against its TTL, not the scraper's staleness: a capacity does
// not change between two scrapes).
type scraperCapacities struct{ s *enginemetrics.Scraper }

// EngineCapacity implements approx.CapacitySource.
func (c scraperCapacities) EngineCapacity(endpoint string) approx.EngineCapacity {
	sig, _ := c.s.Signal(kvroute.Endpoint{ID: endpoint})
	ci := sig.Cache
	failure, completed := c.s.LastScrape(kvroute.Endpoint{ID: endpoint})
	ec := approx.EngineCapacity{Read: sig.Scraped, Invalid: ci.Invalid, Offloading: ci.Offloading,
		Pending: !completed, Failure: failure}
	if ci.Reported {
		ec.Capacity = approx.Capacity{GPUBlocks: ci.GPUBlocks, CPUBlocks: ci.CPUBlocks, BlockSize: ci.BlockSize}
	}
	return ec
}
