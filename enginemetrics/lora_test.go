package enginemetrics

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvroute/kvroute"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// loraSample is the shape of vLLM's LoRA gauge after a few iterations:
// every combination of adapters it reported stays as its own series at
// the wall-clock time it was last set; the last iteration was idle.
const loraSample = vllmSample + `# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.7648e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="sql",waiting_lora_adapters=""} 1.7647e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="sql,chat",waiting_lora_adapters="code"} 1.7646e+09
`

func TestParseLoRA(t *testing.T) {
	gauges := "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:kv_cache_usage_perc 0\n"
	series := func(running, waiting, max string, ts float64) string {
		return fmt.Sprintf("vllm:lora_requests_info{max_lora=%q,running_lora_adapters=%q,waiting_lora_adapters=%q} %v\n", max, running, waiting, ts)
	}
	for _, tc := range []struct {
		name  string
		body  string
		want  LoRAInfo
		drops loraDrops
	}{
		{name: "no gauge: no adapters", body: vllmSample, want: LoRAInfo{}},
		{name: "latest series naming adapters; an idle iteration after it is passed over", body: loraSample,
			want: LoRAInfo{Reported: true, Running: []string{"sql"}, MaxLoRA: 2, Timestamp: 1.7647e+09}},
		{name: "order in the page does not matter, the value does",
			body: gauges + series("b", "", "4", 20) + series("a", "c", "4", 30) + series("d", "", "4", 10),
			want: LoRAInfo{Reported: true, Running: []string{"a"}, Waiting: []string{"c"}, MaxLoRA: 4, Timestamp: 30}},
		{name: "only idle series: reported, no adapters, max_lora kept",
			body: gauges + series("", "", "3", 5) + series("", "", "3", 7),
			want: LoRAInfo{Reported: true, MaxLoRA: 3, Timestamp: 7}},
		{name: "spaces trimmed, duplicates folded",
			body: gauges + series(" a, b ,a", "b", "2", 1),
			want: LoRAInfo{Reported: true, Running: []string{"a", "b"}, Waiting: []string{"b"}, MaxLoRA: 2, Timestamp: 1}},
		{name: "invalid names dropped and counted",
			body: gauges + "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"a,,\x01x," +
				strings.Repeat("n", MaxLoRANameBytes+1) + "\"} 1\n",
			want:  LoRAInfo{Reported: true, Running: []string{"a"}, MaxLoRA: 2, Timestamp: 1},
			drops: loraDrops{3, 0, 0}},
		{name: "names not UTF-8 dropped and counted as invalid, the rest kept",
			body:  gauges + "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"a,\xffbad\",waiting_lora_adapters=\"b\xc3,\xe2\x82\"} 1\n",
			want:  LoRAInfo{Reported: true, Running: []string{"a"}, MaxLoRA: 2, Timestamp: 1},
			drops: loraDrops{3, 0, 0}},
		{name: "max_lora not UTF-8 dropped and counted",
			body:  gauges + "vllm:lora_requests_info{max_lora=\"2\xff\",running_lora_adapters=\"a\"} 1\n",
			want:  LoRAInfo{Reported: true, Running: []string{"a"}, Timestamp: 1},
			drops: loraDrops{0, 0, 1}},
		{name: "bad max_lora dropped and counted",
			body:  gauges + series("a", "", "-1", 1),
			want:  LoRAInfo{Reported: true, Running: []string{"a"}, Timestamp: 1},
			drops: loraDrops{0, 0, 1}},
		{name: "NaN series ignored",
			body: gauges + series("a", "", "2", 1) + "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"z\"} NaN\n",
			want: LoRAInfo{Reported: true, Running: []string{"a"}, MaxLoRA: 2, Timestamp: 1}},
		{name: "no finite series: no adapters, counted",
			body:  gauges + "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"z\"} NaN\n" + series("y", "", "2", math.Inf(1)),
			want:  LoRAInfo{},
			drops: loraDrops{0, 0, 0, 1}},
		{name: "not a gauge: no adapters, counted",
			body:  gauges + "# TYPE vllm:lora_requests_info counter\n" + series("a", "", "2", 1),
			want:  LoRAInfo{},
			drops: loraDrops{0, 0, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig, drops, err := parse([]byte(tc.body), 0)
			require.Nil(t, err)
			require.Equal(t, tc.want, sig.LoRA)
			require.Equal(t, tc.drops, drops)
		})
	}
}

// An adapter name that is not UTF-8 (expfmt refuses such a label value)
// is dropped and counted as invalid_name, as the package doc says; the
// scrape, and with it the engine's queue and KV-cache signal, is kept.
func TestLoRANameNotUTF8KeepsTheScrape(t *testing.T) {
	body := "vllm:num_requests_waiting 7\nvllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.5\n" +
		"vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"a,\xffbad\",waiting_lora_adapters=\"\"} 1\n"
	sig, drops, err := parse([]byte(body), 0)
	require.Nil(t, err, "the scrape failed")
	require.Equal(t, 7, sig.Waiting)
	require.Equal(t, 1, sig.Running)
	require.Equal(t, 0.5, sig.KVCacheUsage)
	require.Equal(t, []string{"a"}, sig.LoRA.Running)
	require.Equal(t, loraDrops{1, 0, 0}, drops)

	// Lines of the gauges the signal needs are not rewritten: one that is
	// not UTF-8 still fails the scrape as parse.
	_, _, err = parse([]byte("vllm:num_requests_waiting{model_name=\"\xff\"} 7\nvllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.5\n"), 0)
	require.NotNil(t, err)
	require.Equal(t, reasonParse, err.reason)
}

func TestParseLoRABounded(t *testing.T) {
	names := make([]string, MaxLoRAAdapters+10)
	for i := range names {
		names[i] = fmt.Sprintf("adapter-%d", i)
	}
	body := "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:kv_cache_usage_perc 0\n" +
		fmt.Sprintf("vllm:lora_requests_info{max_lora=\"8\",running_lora_adapters=%q} 1\n", strings.Join(names, ","))
	sig, drops, err := parse([]byte(body), 0)
	require.Nil(t, err)
	require.Len(t, sig.LoRA.Running, MaxLoRAAdapters)
	require.Equal(t, loraDrops{0, 10, 0}, drops)
}

func TestLoRAInfoQueries(t *testing.T) {
	l := LoRAInfo{Reported: true, Running: []string{"a", "b"}, Waiting: []string{"b", "c"}, MaxLoRA: 3}
	require.True(t, l.IsRunning("a"))
	require.False(t, l.IsRunning("c"))
	require.True(t, l.IsWaiting("c"))
	require.Equal(t, 3, l.Adapters())
	require.True(t, l.AtCap())
	l.MaxLoRA = 0
	require.False(t, l.AtCap(), "an unknown cap is never reached")
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = l.IsRunning("b") || l.IsWaiting("x") }))
}

// TestScraperLoRA scrapes the LoRA gauge over HTTP: the state is read
// through Scraper.LoRA, dropped names are counted under the endpoint's
// configured ID, and a failed scrape makes the state unknown.
func TestScraperLoRA(t *testing.T) {
	body := loraSample + "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"late,\x7f\"} 1.8e+09\n"
	var fail atomic.Bool
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		page(body)(w, r)
	})
	s, clk, _ := newScraper(t, manualConfig())
	ep := endpointOf(srv)
	s.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s, ep, 1)
	l, ok := s.LoRA(ep)
	require.True(t, ok)
	require.Equal(t, []string{"late"}, l.Running)
	require.Equal(t, 2, l.MaxLoRA)
	require.Equal(t, 1.0, testutil.ToFloat64(s.m.loraDrops.WithLabelValues(ep.ID, loraDropInvalid)))
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = s.LoRA(ep) }))

	fail.Store(true)
	scrapeAgain(t, s, clk, ep)
	l, ok = s.LoRA(ep)
	require.False(t, ok, "a failed scrape leaves the state unknown")
	require.Equal(t, []string{"late"}, l.Running, "the last good state is still shown")
	_, ok = s.LoRA(kvroute.Endpoint{ID: "10.0.0.9:8000"})
	require.False(t, ok, "an endpoint never given is unknown")
}
