package labelselector

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	labels := map[string]string{"role": "decode", "zone": "a", "app.kubernetes.io/name": "vllm", "empty": "", "gpus": "4"}
	for _, tc := range []struct {
		in    string
		match bool
		reqs  int
	}{
		{"", true, 0},
		{"   ", true, 0},
		{"role=decode", true, 1},
		{"role==decode", true, 1},
		{"role = decode", true, 1},
		{"role=prefill", false, 1},
		{"role!=prefill", true, 1},
		{"role!=decode", false, 1},
		{"missing!=x", true, 1},
		{"zone in (a,b)", true, 1},
		{"zone in ( b , c )", false, 1},
		{"missing in (a)", false, 1},
		{"zone notin (b,c)", true, 1},
		{"zone notin (a)", false, 1},
		{"missing notin (a)", true, 1},
		{"role", true, 1},
		{"missing", false, 1},
		{"!missing", true, 1},
		{"! role", false, 1},
		{"empty=", true, 1},
		{"empty", true, 1},
		{"app.kubernetes.io/name=vllm", true, 1},
		{"role=decode,zone in (a,b),!draining", true, 3},
		{"role=decode, zone notin (a), !draining", false, 3},
		{"role in (decode,prefill),zone", true, 2},
		{"empty in ()", true, 1},             // Kubernetes reads () as the set of the empty value
		{"zone notin ()", true, 1},           // zone is "a", not ""
		{"gpus>1,gpus<16", true, 2},          // integer comparisons, as in Kubernetes
		{"zone>1", false, 1},                 // "a" is not an integer
		{"in in (in), notin", false, 2},      // in and notin are keys and values where one is expected
		{"role=decode\x00,zone=a", true, 2},  // a NUL ends the token before it, as in Kubernetes' lexer
		{"role=decode \x00,zone=b", true, 1}, // and ends the selector where a token would start
	} {
		s, err := Parse(tc.in)
		require.NoError(t, err, tc.in)
		require.Len(t, s.reqs, tc.reqs, tc.in)
		require.Equal(t, tc.match, s.Matches(labels), tc.in)
		require.Equal(t, tc.in, s.String())
	}
	for _, tc := range []struct{ in, msg string }{
		{",", "expected a requirement"},
		{"role=decode,", "expected a requirement after ','"},
		{"role=decode,,zone", "expected a requirement after ','"},
		{"role decode", "expected an operator"},
		{"role=dec ode", "expected ',' or end of selector"},
		{"role=a|b", "label value must be empty or letters"},
		{"zone in a,b", "expected '(' after in"},
		{"zone in (a,", "expected a value or ',' in the set"},
		{"zone in (a b)", "expected ',' or ')' in the set"},
		{"zone notin (a", "expected ',' or ')' in the set"},
		{"!", "expected a label key"},
		{"!=x", "expected a requirement"},
		{"=x", "expected a requirement"},
		{"!a=b", "expected ',' or end of selector"},
		{"gpus>x", "must be a decimal integer"},
		{"k€=v", "label key name must be"},
		{"-a", "label key name must be"},
		{"a/b/c", "more than one '/'"},
		{"Example.com/x", "prefix is not a lower-case DNS subdomain"},
		{strings.Repeat("k", 64), "name is longer than 63 bytes"},
		{"k=" + strings.Repeat("v", 64), "label value is longer than 63 bytes"},
	} {
		_, err := Parse(tc.in)
		var se *Error
		require.True(t, errors.As(err, &se), "%q: %v", tc.in, err)
		require.Contains(t, se.Msg, tc.msg, tc.in)
		require.Equal(t, tc.in, se.Input)
		require.True(t, strings.Contains(err.Error(), tc.in))
	}
}
