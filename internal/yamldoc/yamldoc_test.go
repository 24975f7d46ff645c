package yamldoc

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestToJSON(t *testing.T) {
	for _, doc := range []string{
		"model: m\n---\nbogus: 1\n",
		"{\"model\":\"m\"}\n---\n{\"blockSize\":16}\n",
		"- a\n---\n- b\n",
	} {
		_, err := ToJSON([]byte(doc))
		require.ErrorIs(t, err, ErrSeveralDocuments, doc)
	}
	_, err := ToJSON([]byte("model: m\n---\nblockSize: [unclosed\n"))
	require.ErrorContains(t, err, "yaml", "a malformed second document is not dropped unread")
	_, err = ToJSON([]byte("a: 1\na: 2\n"))
	require.Error(t, err, "a key given twice")
	for doc, want := range map[string]string{
		"":                      "null",
		"---\n":                 "null",
		"---\na: 1\n---\n":      `{"a":1}`,
		"a: 1\n---\n---\n":      `{"a":1}`,
		`{"a": "2s", "b": [1]}`: `{"a":"2s","b":[1]}`,
	} {
		js, err := ToJSON([]byte(doc))
		require.NoError(t, err, doc)
		require.JSONEq(t, want, string(js), doc)
	}
}
