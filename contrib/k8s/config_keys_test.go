package k8s

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A label or annotation key that Kubernetes would not take on a pod
// matches no pod, so a typo in one would leave every pod at the defaults
// without a word: the configuration is refused instead, with an error
// naming the key and what is wrong with it. Annotation keys are, as
// Kubernetes checks them, compared without regard to case.
func TestConfigRefusesMalformedKeys(t *testing.T) {
	long := strings.Repeat("k", 64)
	for doc, want := range map[string]string{
		`{"roleLabel":"llm-d.ai/ role"}`:                            `roleLabel "llm-d.ai/ role": name part must consist of`,
		`{"roleLabel":"Llm-d.ai/role"}`:                             `roleLabel "Llm-d.ai/role": prefix part a lowercase RFC 1123 subdomain`,
		`{"roleLabel":"-role"}`:                                     `roleLabel "-role": name part must consist of`,
		`{"modelsAnnotation":"kvroute.io/models/x"}`:                `modelsAnnotation "kvroute.io/models/x": a valid label key must consist of`,
		`{"eventsPortAnnotation":"kvroute.io/"}`:                    `eventsPortAnnotation "kvroute.io/": name part must be non-empty`,
		`{"replayPortAnnotation":"kvroute.io/` + long + `"}`:        `replayPortAnnotation "kvroute.io/` + long + `": name part must be no more than 63 bytes`,
		`{"modelsAnnotation":"` + strings.Repeat("p", 254) + `/x"}`: "modelsAnnotation",
	} {
		doc = `{"namespace":"ns","pool":"p",` + doc[1:]
		_, err := LoadConfig(strings.NewReader(doc))
		require.ErrorContains(t, err, "k8s: config: "+want, doc)
	}
	for _, doc := range []string{
		`{"roleLabel":"example.com/pd","modelsAnnotation":"Kvroute.io/Models"}`,
		`{"eventsPortAnnotation":"events","replayPortAnnotation":"a.b-c_d"}`,
		`{"roleLabel":"` + strings.Repeat("p", 253) + `/x"}`,
	} {
		doc = `{"namespace":"ns","pool":"p",` + doc[1:]
		_, err := LoadConfig(strings.NewReader(doc))
		require.NoError(t, err, doc)
	}
}
