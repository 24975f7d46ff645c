package bytebudget

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ReadAll reads a body whole, holding of the budget no more than its
// buffer; a body the budget has no room for is refused with what it took
// reported, and a body longer than announced is refused.
func TestReadAll(t *testing.T) {
	b := Budget{Limit: 1 << 20}
	body := bytes.Repeat([]byte("x"), 100<<10)
	got, held, err := b.ReadAll(bytes.NewReader(body), int64(len(body)), 1<<20)
	require.NoError(t, err)
	require.Equal(t, body, got)
	require.Equal(t, int64(len(body)), held, "a known size is never exceeded")
	require.Equal(t, held, b.InUse())
	b.Release(held)

	got, held, err = b.ReadAll(bytes.NewReader(body), -1, 1<<20)
	require.NoError(t, err)
	require.Equal(t, body, got)
	require.Less(t, held, int64(2*len(body)))
	b.Release(held)

	got, held, err = b.ReadAll(strings.NewReader(""), 0, 1<<20)
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Zero(t, held)

	_, held, err = b.ReadAll(bytes.NewReader(body), 10, 1<<20)
	require.ErrorIs(t, err, ErrTooLong)
	b.Release(held)

	small := Budget{Limit: 80 << 10}
	_, held, err = small.ReadAll(bytes.NewReader(body), int64(len(body)), 1<<20)
	require.ErrorIs(t, err, ErrNoRoom)
	require.Equal(t, int64(64<<10), held, "the first buffer is charged, the second did not fit")
	small.Release(held)
	require.Zero(t, small.InUse())

	_, held, err = b.ReadAll(io.MultiReader(bytes.NewReader(body), iotest{}), -1, 1<<20)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	b.Release(held)
	require.Zero(t, b.InUse())
}

// iotest fails every read.
type iotest struct{}

func (iotest) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
