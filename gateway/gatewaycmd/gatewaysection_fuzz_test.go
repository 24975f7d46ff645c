package gatewaycmd

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// FuzzDecodeGatewaySection feeds arbitrary configuration documents through
// the path --config takes to the gateway's settings, splitGatewaySection
// then decodeGatewaySection (seed corpus in
// testdata/fuzz/FuzzDecodeGatewaySection): it never panics; a refusal
// names the gateway section, so that the operator knows which key to fix;
// an accepted section validates; and written back in the form the file
// uses (durations as strings) it decodes to the same settings.
func FuzzDecodeGatewaySection(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","gateway":{"maxBodyBytes":1048576,"readHeaderTimeout":"5s","idleTimeout":"2m","tokenizeOnce":["completions"]}}`,
		`{"gateway":{"admission":{"fairness":"deficit_round_robin","objectives":[{"name":"chat","priority":1,"queueTimeout":"5s"}]},"engineMetrics":{"interval":"100ms"}}}`,
		`{"gateway":{"disagg":{"nonCachedTokens":512,"mode":"exchange","exchange":{"prefillTimeout":"2s"}},"session":{"ttl":"90s","derive":true}}}`,
		`{"gateway":{"models":{"served":{"10.0.0.1:8000":["beta"]}},"lora":{},"approximate":{"enabled":true,"ttl":"5m"}}}`,
		`{"gateway":{"bodyReadTimeout":30}}`, `{"gateway":{"maxBodyBytes":-1}}`, `{"gateway":null}`, `{"gateway":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		section, _, err := splitGatewaySection(doc)
		if err != nil {
			return
		}
		g, err := decodeGatewaySection(section)
		if err != nil {
			var ce *jsonconf.Error
			named := strings.HasPrefix(err.Error(), gatewaySection) ||
				(errors.As(err, &ce) && strings.HasPrefix(ce.Path, gatewaySection))
			if !named {
				t.Fatalf("section %s: error %q does not name the %s section", section, err, gatewaySection)
			}
			return
		}
		if err := g.validate(); err != nil {
			t.Fatalf("section %s decoded to an invalid config: %v", section, err)
		}
		enc, err := jsonconf.Marshal(g)
		if err != nil {
			t.Fatalf("section %s: marshal: %v", section, err)
		}
		back, err := decodeGatewaySection(enc)
		if err != nil {
			t.Fatalf("section %s written back as %s: %v", section, enc, err)
		}
		if !reflect.DeepEqual(back, g) {
			t.Fatalf("section %s written back as %s changed\n%+v\nto\n%+v", section, enc, g, back)
		}
	})
}
