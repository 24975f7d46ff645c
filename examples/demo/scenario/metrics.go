package scenario

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Metrics is one scrape of a Prometheus text endpoint: every sample, keyed by
// its name and labels exactly as exposed, e.g.
// `vllm:prefix_cache_hits_total{model_name="m"}`.
type Metrics map[string]float64

// ParseMetrics reads the Prometheus text exposition format. Comments and
// lines it cannot read are skipped; it only needs to understand what the
// engines and the gateway expose.
func ParseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the last space outside the label set; an
		// optional timestamp follows the value.
		end := strings.LastIndexByte(line, '}')
		rest := line
		key := ""
		if end >= 0 {
			key, rest = line[:end+1], strings.TrimSpace(line[end+1:])
		} else {
			i := strings.IndexByte(line, ' ')
			if i < 0 {
				continue
			}
			key, rest = line[:i], strings.TrimSpace(line[i+1:])
		}
		if i := strings.IndexByte(rest, ' '); i >= 0 {
			rest = rest[:i]
		}
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			continue
		}
		m[key] = v
	}
	return m, sc.Err()
}

// Sum adds every sample of the metric called name, whatever its labels.
func (m Metrics) Sum(name string) float64 { return m.Get(name) }

// Get returns the sum of the samples of name whose labels include every
// label=value pair given (as "label", "value", ...).
func (m Metrics) Get(name string, labelPairs ...string) float64 {
	total := 0.0
	for k, v := range m {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labelPairs); i += 2 {
			if !strings.Contains(labels, labelPairs[i]+`="`+labelPairs[i+1]+`"`) {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// Scrape fetches and parses baseURL + "/metrics".
func Scrape(ctx context.Context, client *http.Client, baseURL string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", baseURL, resp.Status)
	}
	return ParseMetrics(resp.Body)
}
