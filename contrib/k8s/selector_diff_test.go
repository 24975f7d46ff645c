package k8s

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kvroute/kvroute/internal/labelselector"
)

// diffLabelSets are the label sets both parsers' selectors are matched
// against: empty, typical, empty values, integers for > and <, the words in
// and notin, qualified keys.
var diffLabelSets = []map[string]string{
	{},
	{"a": "b"},
	{"a": ""},
	{"a": "5", "b": "-3"},
	{"role": "decode", "zone": "us-east-1a", "app.kubernetes.io/name": "vllm"},
	{"in": "in", "notin": "notin", "x": "in"},
	{"example.com/x": "y", "a.b-c/D_e.f": "1", "k": "v"},
	{"a": "99999999999999999999", "gpus": "8"},
}

// checkSameAsKubernetes parses sel with labelselector.Parse and with
// Kubernetes' labels.Parse and fails unless both accept it or both reject
// it, and, when accepted, both selectors agree on every label set.
func checkSameAsKubernetes(t testing.TB, sel string) {
	t.Helper()
	ks, kerr := labels.Parse(sel)
	ours, oerr := labelselector.Parse(sel)
	if (kerr == nil) != (oerr == nil) {
		t.Fatalf("selector %q: Kubernetes err=%v, labelselector err=%v", sel, kerr, oerr)
	}
	if kerr != nil {
		return
	}
	for _, ls := range diffLabelSets {
		if k, o := ks.Matches(labels.Set(ls)), ours.Matches(ls); k != o {
			t.Fatalf("selector %q on %v: Kubernetes matches=%v, labelselector matches=%v", sel, ls, k, o)
		}
	}
}

// selectorDiffCases are inputs on which a hand-written parser easily
// differs from Kubernetes': key and prefix rules, value rules and lengths,
// every operator with and without spaces, set edge cases, the words in and
// notin in every position, blanks, control bytes and NUL.
var selectorDiffCases = []string{
	// Empty and blank.
	"", " ", "\t", "\r\n", " \t \n ",
	// Keys: names.
	"a", "A", "0", "a1", "a-b", "a_b", "a.b", "aB9", "-a", "a-", "_a", "a_", ".a", "a.", "a..b", "a--b",
	strings.Repeat("k", 63), strings.Repeat("k", 64), "k€", "ké", "a+b", "a:b", "a@b", "a\"b", "a'b", "a;b",
	// Keys: prefixes.
	"example.com/x", "Example.com/x", "EXAMPLE.COM/x", "a/b", "a/b/c", "/a", "a/", "/", "//a",
	"ex_ample.com/x", "-ex.com/x", "ex-.com/x", "ex..com/x", ".ex.com/x", "ex.com./x", "1.2.3/x",
	"app.kubernetes.io/name", "app.kubernetes.io/name=vllm", "a-b.c-d/e",
	strings.Repeat("p", 253) + "/x", strings.Repeat("p", 254) + "/x",
	strings.Repeat("p", 63) + "." + strings.Repeat("q", 189) + "/x",
	strings.Repeat("p", 100) + ".q/x", // a DNS label over 63 bytes inside a prefix
	"example.com/" + strings.Repeat("n", 63), "example.com/" + strings.Repeat("n", 64),
	"example.com/-x", "example.com/x.",
	// Equality.
	"a=b", "a==b", "a!=b", "a = b", "a == b", "a != b", "a=", "a==", "a!=", "a= ", "a=b ", " a=b",
	"a===b", "a=!b", "a!==b", "a=b=c", "a=b,c=d", "a=-b", "a=b-", "a=B_9.z", "a=_b",
	"a=" + strings.Repeat("v", 63), "a=" + strings.Repeat("v", 64), "a=b c", "a=(b)", "a=in", "a=notin",
	"=", "==", "!=", "=a", "!=a", "a=,b", "a=,", ",a=b",
	// Existence.
	"!a", "! a", "!a,b", "!a=b", "!a in (b)", "!", "!!a", "a!", "a !", "!a,!b", "!example.com/x", "!-a", "!in",
	// Sets.
	"a in (b)", "a in (b,c)", "a in ( b , c )", "a in ()", "a in ( )", "a in (,)", "a in (,b)", "a in (b,)",
	"a in (b,,c)", "a in (b", "a in (b,", "a in (", "a in b", "a in", "a in (b c)", "a in (b)(c)",
	"a in (b),c", "a in(b)", "a in (b)c", "a notin (b)", "a notin ()", "a notin(b,c)", "a notin",
	"a in (in)", "a in (notin)", "a in (-b)", "a in (" + strings.Repeat("v", 64) + ")", "a in ((b))",
	"a in (b,b)", "ain (b)", "a notin(b)", "a in (=)", "a in (!)",
	// The words in and notin.
	"in", "notin", "in=in", "in in (in)", "notin notin (notin)", "in,notin", "a,in", "in in", "in (a)",
	// Comparisons.
	"a>1", "a<1", "a > 1", "a>-1", "a>+1", "a>01", "a>1.5", "a>", "a<", "a>b", "a>=1", "a<=1", "a>>1",
	"a>99999999999999999999", "a>9223372036854775807", "a<9223372036854775808", "a>1,a<10", "!a>1",
	// Commas and structure.
	",", "a,", ",a", "a,,b", "a, b", "a ,b", "a , b", "a b", "a,b,c", "a=b,a=c", "a,a", "a=b, !a",
	"(", ")", "()", "a(b)", "a)",
	// Other blanks, control bytes and NUL.
	"a=b\tc", "a\tin\t(b)", "a\nin\n(b)", "a\r=\rb", "a\v", "a\f=b", "\x01", "a=\x7f",
	"a\x00", "\x00a", "a\x00b", "a=\x00b", "a=b\x00,c", "a=b \x00,c", "!\x00=b", "a\x00=b", "a in (\x00b)",
	"a in (b\x00)", "a in (b,\x00)", "a, \x00", "a,\x00", "\xff", "a=\xff", "a=é",
}

// TestSelectorDifferential runs selectorDiffCases through labelselector and
// Kubernetes' labels.Parse: same accept or reject, same matches.
func TestSelectorDifferential(t *testing.T) {
	require.GreaterOrEqual(t, len(selectorDiffCases), 60)
	accepted := 0
	for _, sel := range selectorDiffCases {
		checkSameAsKubernetes(t, sel)
		if _, err := labels.Parse(sel); err == nil {
			accepted++
		}
	}
	// Both outcomes are well represented, so agreement is not vacuous.
	require.Greater(t, accepted, 40)
	require.Greater(t, len(selectorDiffCases)-accepted, 40)
}

// TestSelectorDifferentialKnownCases pins the Kubernetes behaviour the
// issue's differential test was about, so a change in either parser shows
// here by name.
func TestSelectorDifferentialKnownCases(t *testing.T) {
	for sel, ok := range map[string]bool{
		"-a": false, "a/b/c": false, "Example.com/x": false, strings.Repeat("k", 64): false,
		"a=" + strings.Repeat("v", 64): false, "a in ()": true, "a notin ()": true, "a>1": true,
	} {
		_, kerr := labels.Parse(sel)
		_, oerr := labelselector.Parse(sel)
		require.Equal(t, ok, kerr == nil, "Kubernetes on %q: %v", sel, kerr)
		require.Equal(t, ok, oerr == nil, "labelselector on %q: %v", sel, oerr)
	}
	s, err := labelselector.Parse("a in ()")
	require.NoError(t, err)
	require.True(t, s.Matches(map[string]string{"a": ""}), `"a in ()" is "a in ('')"`)
	require.False(t, s.Matches(map[string]string{"a": "b"}))
}

// FuzzSelectorDifferential holds labelselector.Parse to Kubernetes'
// labels.Parse on arbitrary input (seed corpus in testdata/fuzz and
// selectorDiffCases).
func FuzzSelectorDifferential(f *testing.F) {
	for _, sel := range selectorDiffCases {
		f.Add(sel)
	}
	f.Fuzz(func(t *testing.T, sel string) {
		if len(sel) > 4096 {
			return
		}
		checkSameAsKubernetes(t, sel)
	})
}
