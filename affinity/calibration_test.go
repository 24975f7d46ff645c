package affinity

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPeakPrefillThroughputOddCount(t *testing.T) {
	ttfts := make([]time.Duration, 11)
	for i := range ttfts {
		ttfts[i] = time.Duration(i+1) * 100 * time.Millisecond // 100 ms … 1.1 s
	}
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(ttfts), func(i, j int) { ttfts[i], ttfts[j] = ttfts[j], ttfts[i] })
	orig := slices.Clone(ttfts)

	v, err := PeakPrefillThroughput(8192, ttfts)
	require.NoError(t, err)
	require.Equal(t, 8192e9/600e6, v, "median of 100…1100 ms is 600 ms")
	require.Equal(t, orig, ttfts, "input is not modified")
}

func TestPeakPrefillThroughputEvenCount(t *testing.T) {
	ttfts := []time.Duration{}
	for i := range 20 {
		ttfts = append(ttfts, time.Duration(500+i)*time.Millisecond) // 500 … 519 ms
	}
	v, err := PeakPrefillThroughput(8192, ttfts)
	require.NoError(t, err)
	require.Equal(t, 8192e9/509.5e6, v, "median is the mean of 509 and 510 ms")
}

// The default 15,928 tokens/s is 8,192 tokens prefilled in ~514.3 ms.
func TestPeakPrefillThroughputReferenceValue(t *testing.T) {
	ttft := time.Duration(8192 * int64(time.Second) / 15928) // 514,314,414 ns
	ttfts := slices.Repeat([]time.Duration{ttft - time.Millisecond, ttft, ttft + time.Millisecond}, 7)
	v, err := PeakPrefillThroughput(8192, ttfts)
	require.NoError(t, err)
	require.InDelta(t, 15928, v, 0.001)
}

func TestPeakPrefillThroughputDiscardsInvalidSamples(t *testing.T) {
	ttfts := []time.Duration{0, -time.Second, 0}
	for range 10 {
		ttfts = append(ttfts, 250*time.Millisecond)
	}
	v, err := PeakPrefillThroughput(2048, ttfts)
	require.NoError(t, err)
	require.Equal(t, 8192.0, v, "2048 tokens / 250 ms; zero and negative samples ignored")

	_, err = PeakPrefillThroughput(2048, ttfts[1:12]) // 9 valid of 11
	require.ErrorIs(t, err, ErrTooFewSamples)
	require.ErrorContains(t, err, "9 of 11")

	_, err = PeakPrefillThroughput(2048, nil)
	require.ErrorIs(t, err, ErrTooFewSamples)
}

func TestPeakPrefillThroughputRejectsChunk(t *testing.T) {
	ttfts := slices.Repeat([]time.Duration{time.Second}, 10)
	for _, chunk := range []int{0, -8192} {
		_, err := PeakPrefillThroughput(chunk, ttfts)
		require.ErrorIs(t, err, ErrInvalidChunk)
	}
}

func TestPeakPrefillThroughputExtremes(t *testing.T) {
	v, err := PeakPrefillThroughput(1, slices.Repeat([]time.Duration{1 << 62}, 10))
	require.NoError(t, err)
	require.Greater(t, v, 0.0)
	v, err = PeakPrefillThroughput(1<<30, slices.Repeat([]time.Duration{1}, 10))
	require.NoError(t, err)
	require.Equal(t, float64(1<<30)*1e9, v)
}
