package k8s

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kvroute/kvroute/internal/labelselector"
)

// labelselector.CheckLabels, which kvroute holds an endpoints file's labels
// to, takes exactly the label keys and values Kubernetes takes on a pod.
func TestCheckLabelsSameAsKubernetes(t *testing.T) {
	words := []string{
		"", "a", "A", "0", "a1", "a-b", "a_b", "a.b", "aB9", "-a", "a-", "_a", "a_", ".a", "a.", "a..b", "a--b",
		strings.Repeat("k", 63), strings.Repeat("k", 64), "k€", "ké", "a+b", "a:b", "a b", "a\nb", "a\x00b",
		"example.com/x", "Example.com/x", "a/b", "a/b/c", "/a", "a/", "/", "//a", "ex_ample.com/x", "-ex.com/x",
		"ex-.com/x", "ex..com/x", ".ex.com/x", "ex.com./x", "1.2.3/x", "app.kubernetes.io/name", "llm-d.ai/role",
		strings.Repeat("p", 253) + "/x", strings.Repeat("p", 254) + "/x", "org/model",
	}
	for _, w := range words {
		kKey := len(validation.IsQualifiedName(w)) == 0
		if oKey := labelselector.CheckLabels(map[string]string{w: "v"}) == nil; kKey != oKey {
			t.Errorf("key %q: Kubernetes valid=%v, CheckLabels valid=%v", w, kKey, oKey)
		}
		kVal := len(validation.IsValidLabelValue(w)) == 0
		if oVal := labelselector.CheckLabels(map[string]string{"k": w}) == nil; kVal != oVal {
			t.Errorf("value %q: Kubernetes valid=%v, CheckLabels valid=%v", w, kVal, oVal)
		}
	}
}
