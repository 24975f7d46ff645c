package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// membersOf runs Members for names and returns the values as strings ("-"
// for an absent member).
func membersOf(t *testing.T, body string, names ...string) []string {
	t.Helper()
	vals := make([][]byte, len(names))
	require.NoError(t, Members([]byte(body), names, vals), body)
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = "-"
		if v != nil {
			out[i] = string(v)
		}
	}
	return out
}

func TestMembersMatchNamesExactlyAndKeepTheLast(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string // token_ids, cache_salt
	}{
		{`{"token_ids":[1,2],"cache_salt":"s"}`, []string{`[1,2]`, `"s"`}},
		{` { "token_ids" : [1] } `, []string{`[1]`, "-"}},
		// Case variants are unknown members: as if absent.
		{`{"TOKEN_IDS":[1],"Cache_Salt":"s"}`, []string{"-", "-"}},
		{`{"token_ids":[1],"Token_Ids":[2]}`, []string{`[1]`, "-"}},
		{`{"Token_Ids":[2],"token_ids":[1]}`, []string{`[1]`, "-"}},
		// Repeated names: the last one wins, whatever it holds.
		{`{"token_ids":[1],"token_ids":[2,3]}`, []string{`[2,3]`, "-"}},
		{`{"cache_salt":"a","cache_salt":null}`, []string{"-", `null`}},
		{`{"cache_salt":{"x":1},"cache_salt":{"y":2}}`, []string{"-", `{"y":2}`}},
		// Escapes are decoded before the match.
		{`{"token\u005fids":[4]}`, []string{`[4]`, "-"}},
		{`{"token\u005FIDS":[4]}`, []string{"-", "-"}},
		// Nested members are not top-level ones.
		{`{"x":{"token_ids":[1]}}`, []string{"-", "-"}},
		{`{}`, []string{"-", "-"}},
	} {
		require.Equal(t, c.want, membersOf(t, c.body, "token_ids", "cache_salt"), c.body)
	}
}

func TestMembersRefusesWhatEncodingJSONRefuses(t *testing.T) {
	vals := make([][]byte, 1)
	for _, body := range []string{
		``, `null`, `[]`, `"x"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":1}{}`,
		`{"a\x":1}`, `{"a":[1,}`, `{a:1}`,
	} {
		err := Members([]byte(body), []string{"a"}, vals)
		require.Error(t, err, body)
		require.ErrorIs(t, err, ErrSyntax, body)
	}
	// Nesting: encoding/json's own bound, counting the object itself.
	nested := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	require.NoError(t, Members(nested(maxMembersDepth-1), []string{"a"}, vals))
	require.NoError(t, json.Unmarshal(nested(maxMembersDepth-1), new(any)))
	require.ErrorIs(t, Members(nested(maxMembersDepth), []string{"a"}, vals), ErrSyntax)
	require.Error(t, json.Unmarshal(nested(maxMembersDepth), new(any)))
}

func TestMembersAllocatesNothingForPlainNames(t *testing.T) {
	body := []byte(`{"model":"m","token_ids":[1,2,3],"features":{"mm_hashes":{}},"cache_salt":"s"}`)
	names := []string{"token_ids", "cache_salt", "features"}
	var vals [3][]byte
	allocs := testing.AllocsPerRun(100, func() {
		if Members(body, names, vals[:]) != nil {
			t.Fatal("refused")
		}
	})
	require.Zero(t, allocs)
	require.Equal(t, `{"mm_hashes":{}}`, string(vals[2]))
}
