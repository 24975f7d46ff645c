package llmd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/llmd"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/session"
)

// FuzzTranslate checks that Load never panics; that LoadResult reads the
// same, less one finding for each stage it returns, and its stages
// validate; that strict mode fails
// exactly when the default finds something, and otherwise reads the same;
// that whatever it accepts validates; and that an accepted configuration,
// marshalled (in kvroute's own keys: the llm-d settings are translated
// away), reads back the same through kvroute.LoadConfig and through
// Translate, with no findings.
func FuzzTranslate(f *testing.F) {
	def, _ := json.Marshal(kvroute.DefaultConfig())
	f.Add(def)
	f.Add([]byte(llmdBlocks))
	for _, s := range []string{
		`{"precise-prefix-cache-producer":{"speculativeTTL":2000}}`, `{"blockSize":64,"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":16}}}`,
		`{"token-load-scorer":{"queueThresholdTokens":0},"token-load-scorer":{}}`, `{"prefix-cache-affinity-filter":null}`,
		`{"index":{"blockSize":16},"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSize":16}}}`, `null`, `[]`,
		"model: m\nprecise-prefix-cache-producer:\n  tokenProcessorConfig: {hashSeed: \"42\"}\n",
		`{"model":"m","session-affinity-scorer":{"strategy":"session_id"},"lora-affinity-scorer":{}}`,
		epc("[{type: prefix-cache-affinity-filter}, {type: token-load-scorer}]", "[{name: d, plugins: [{pluginRef: token-load-scorer, weight: 3}]}]"),
	} {
		f.Add([]byte(s))
	}
	for _, file := range []string{"testdata/endpointpickerconfig.yaml", "testdata/guide/precise-prefix-cache-routing.values.yaml", "testdata/guide/precise-prefix-cache-aware.values.yaml"} {
		data, err := os.ReadFile(filepath.FromSlash(file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, findings, err := llmd.Load(bytes.NewReader(data), llmd.Options{})
		strict, _, strictErr := llmd.Load(bytes.NewReader(data), llmd.Options{Strict: true})
		if err != nil {
			if strictErr == nil {
				t.Fatalf("strict accepted what the default refused (%v): %q", err, data)
			}
			return
		}
		if (strictErr != nil) != (len(findings) > 0) {
			t.Fatalf("strict: %v with %d findings: %q", strictErr, len(findings), data)
		}
		if strictErr == nil && !reflect.DeepEqual(cfg, strict) {
			t.Fatalf("strict read another config from %q", data)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load(%q) accepted an invalid config: %v", data, err)
		}
		res, err := llmd.LoadResult(bytes.NewReader(data), llmd.Options{})
		stages := 0
		for _, on := range []bool{res.Disagg != nil, res.Session != nil, res.Admission != nil, res.LoRA != nil} {
			if on {
				stages++
			}
		}
		if err != nil || !reflect.DeepEqual(res.Config, cfg) || len(findings) != len(res.Findings)+stages ||
			!reflect.DeepEqual(res.Findings, findings[:len(res.Findings)]) {
			t.Fatalf("LoadResult read %q otherwise than Load (its stages as findings): %v", data, err)
		}
		stagesValid(t, res)
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := kvroute.LoadConfig(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		if !reflect.DeepEqual(cfg, back) {
			t.Fatalf("round trip changed\n%+v\nto\n%+v", cfg, back)
		}
		again, err := llmd.Translate(bytes.NewReader(out))
		if err != nil || !reflect.DeepEqual(cfg, again) {
			t.Fatalf("Translate of its own output %s: %v, %+v", out, err, again)
		}
	})
}

// stagesValid fails t when a stage LoadResult returned does not validate by
// its package's rules, or does not read back from its own JSON.
func stagesValid(t *testing.T, res llmd.Result) {
	t.Helper()
	check := func(name string, v interface{ Validate() error }, load func([]byte) (any, error)) {
		if err := v.Validate(); err != nil {
			t.Fatalf("%s: accepted an invalid configuration: %v", name, err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: marshal: %v", name, err)
		}
		back, err := load(out)
		if err != nil || !reflect.DeepEqual(back, reflect.ValueOf(v).Elem().Interface()) {
			t.Fatalf("%s: round trip of %s: %v, %+v", name, out, err, back)
		}
	}
	if res.Disagg != nil {
		check("disagg", res.Disagg, func(b []byte) (any, error) { return disagg.LoadConfig(bytes.NewReader(b)) })
	}
	if res.Session != nil {
		check("session", res.Session, func(b []byte) (any, error) { return session.LoadConfig(bytes.NewReader(b)) })
	}
	if res.Admission != nil {
		check("admission", res.Admission, func(b []byte) (any, error) { return admission.LoadConfig(bytes.NewReader(b)) })
	}
	if res.LoRA != nil {
		check("lora", res.LoRA, func(b []byte) (any, error) { return lora.LoadConfig(bytes.NewReader(b)) })
	}
}
