package tokenload

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScore(t *testing.T) {
	const q = DefaultQueueThresholdTokens
	for _, tc := range []struct {
		name               string
		committed, request int64
		q                  int64
		want               float64
	}{
		{"idle", 0, 0, 0, 1},
		{"1,000,000 committed", 1_000_000, 0, 0, 1 - 1_000_000.0/4_194_304},
		{"committed plus this request", 900_000, 100_000, 0, 1 - 1_000_000.0/4_194_304},
		{"half", q / 2, 0, 0, 0.5},
		{"at Q", q, 0, 0, 0},
		{"above Q", 2 * q, 0, 0, 0},
		{"sum reaches Q", q - 10, 10, 0, 0},
		{"negative q means default", 1_000_000, 0, -1, 1 - 1_000_000.0/4_194_304},
		{"custom q", 250, 250, 1000, 0.5},
		{"negative inputs count as 0", -500, -7, 0, 1},
		{"no overflow", math.MaxInt64, math.MaxInt64, 0, 0},
		{"no overflow, small committed", 1, math.MaxInt64, 0, 0},
	} {
		require.Equal(t, tc.want, Score(tc.committed, tc.request, tc.q), tc.name)
	}
	require.InDelta(t, 0.7616, Score(1_000_000, 0, 0), 1e-4)
}

func TestUncachedTokens(t *testing.T) {
	for _, tc := range []struct {
		name         string
		input, total int
		matched      float64
		blockSize    int
		want         int64
	}{
		{"fully cached", 2048, 32, 32, 64, 0},
		{"half cached", 2048, 32, 16, 64, 1024},
		{"nothing cached", 2048, 32, 0, 64, 2048},
		{"trailing partial block is uncached", 2100, 32, 32, 64, 52},
		{"tail beyond a key cap", 10_000, 32, 32, 64, 10_000 - 2048},
		{"CPU tier, weighted score 0.8 per block", 640, 10, 8, 64, 128},
		{"float sum of ten CPU-tier weights", 640, 10, 7.999999999999999, 64, 128},
		{"fractional score rounds to the nearest token", 640, 10, 9.99, 64, 1},
		{"no match information", 2100, 0, 0, 64, 2100},
		{"shorter than a block", 40, 0, 0, 64, 40},
		{"tokenization failed", 0, 0, 0, 64, 0},
		{"block size unknown", 2048, 32, 32, 0, 2048},
		{"NaN score", 2048, 32, math.NaN(), 64, 2048},
		{"negative score", 2048, 32, -3, 64, 2048},
		{"score above total", 2048, 32, 40, 64, 0},
		{"infinite score", 2048, 32, math.Inf(1), 64, 0},
		{"inconsistent total is clamped to the input", 100, 32, 0, 64, 100},
		{"negative input", -5, 0, 0, 64, 0},
	} {
		require.Equal(t, tc.want, UncachedTokens(tc.input, tc.total, tc.matched, tc.blockSize), tc.name)
	}
}

// TestUncachedTokensAllIsUncachedTokens holds the batch form to the
// per-candidate one, edge values of the match included.
func TestUncachedTokensAllIsUncachedTokens(t *testing.T) {
	matched := []float64{0, math.Copysign(0, -1), 0.5, 1, 1.2, 2.5, 7.999999999, 8, 8.0000001, 31.8, 32, 33, 1e300,
		-1, -0.3, math.NaN(), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64}
	dst := make([]int64, len(matched))
	for _, input := range []int{-5, 0, 1, 100, 2048, 2050, 1 << 40} {
		for _, total := range []int{-1, 0, 1, 32, 33, 1 << 20} {
			for _, bs := range []int{-64, 0, 1, 16, 64} {
				UncachedTokensAll(dst, input, total, matched, bs)
				for i, m := range matched {
					if want := UncachedTokens(input, total, m, bs); dst[i] != want {
						t.Errorf("UncachedTokensAll(%d, %d, %v, %d) = %d, UncachedTokens %d", input, total, m, bs, dst[i], want)
					}
				}
			}
		}
	}
}

// TestRoundTokensIsMathRound holds the call-free rounding of the uncached
// tokens to math.Round over the values it can be given (non-negative,
// below 2⁶³): halves, the largest double below a half, whole numbers near
// 2⁵³ where the fraction stops being representable, and random ones.
func TestRoundTokensIsMathRound(t *testing.T) {
	xs := []float64{0, 0.5, 1.5, 2.5, 0.49999999999999994, math.Nextafter(0.5, 1), 1.4999999999999998,
		7.999999999999999, 127.99999999999999, 1 << 52, 1<<52 + 0.5, 1<<52 - 0.5, 1 << 53, 1<<53 + 2, 1 << 62,
		math.Nextafter(1<<63, 0), math.SmallestNonzeroFloat64}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		xs = append(xs, r.Float64()*float64(int64(1)<<r.IntN(63)))
	}
	for _, x := range xs {
		if got, want := roundTokens(x), int64(math.Round(x)); got != want {
			t.Fatalf("roundTokens(%v) = %d, math.Round %d", x, got, want)
		}
	}
}

// The clamp to [0, inputTokens] holds for every argument, those whose
// totalBlocks × blockSize or uncached block tokens are beyond the int64
// range included (they used to wrap or convert to a negative count), and
// the batch form agrees. With whole matched blocks the result is the exact
// one, computed here without overflow, wherever the uncached blocks' tokens
// are exact in a float64 (below 2⁵³) or at least twice the input (the
// result is then the input).
func TestUncachedTokensClampHoldsForExtremeArguments(t *testing.T) {
	ints := []int{0, 1, 3, 10, 1 << 31, 1 << 32, 1<<62 - 1, 1 << 62, math.MaxInt - 1, math.MaxInt}
	matched := []float64{0, 1, 2, 0.5, 1 << 31, 1 << 62, math.MaxInt, math.Inf(1)}
	dst := make([]int64, len(matched))
	for _, input := range ints {
		for _, total := range ints {
			for _, bs := range ints {
				UncachedTokensAll(dst, input, total, matched, bs)
				for i, m := range matched {
					got := UncachedTokens(input, total, m, bs)
					require.GreaterOrEqual(t, got, int64(0), "UncachedTokens(%d, %d, %v, %d)", input, total, m, bs)
					require.LessOrEqual(t, got, int64(input), "UncachedTokens(%d, %d, %v, %d)", input, total, m, bs)
					require.Equal(t, got, dst[i], "UncachedTokensAll(%d, %d, %v, %d)", input, total, m, bs)
					if want, ok := exactUncached(input, total, m, bs); ok {
						require.Equal(t, want, got, "UncachedTokens(%d, %d, %v, %d)", input, total, m, bs)
					}
				}
			}
		}
	}
	require.Equal(t, int64(10), UncachedTokens(10, 3, 0, 1<<62), "3 × 2⁶² wraps to a negative count of indexed tokens")
	require.Equal(t, int64(math.MaxInt64), UncachedTokens(math.MaxInt, 1<<32, 0, 1<<32), "2⁶⁴ wraps to 0")
}

// exactUncached is UncachedTokens in exact arithmetic, for a whole number
// of matched blocks, and whether the float64 rounding UncachedTokens does
// cannot move it (see TestUncachedTokensClampHoldsForExtremeArguments).
func exactUncached(input, total int, matched float64, bs int) (int64, bool) {
	in := big.NewInt(int64(max(input, 0)))
	if bs <= 0 || total <= 0 {
		return in.Int64(), true
	}
	if math.IsInf(matched, 0) || matched != math.Trunc(matched) {
		return 0, false
	}
	tot, b := big.NewInt(int64(total)), big.NewInt(int64(bs))
	m, _ := big.NewFloat(matched).Int(nil)
	if m.Cmp(tot) > 0 {
		m = tot
	}
	blocks := new(big.Int).Mul(new(big.Int).Sub(tot, m), b)
	v := new(big.Int).Set(blocks)
	if tail := new(big.Int).Sub(in, new(big.Int).Mul(tot, b)); tail.Sign() > 0 {
		v.Add(v, tail)
	}
	exact := blocks.Cmp(big.NewInt(1<<53)) < 0
	switch {
	case blocks.Cmp(new(big.Int).Lsh(in, 1)) >= 0:
		return in.Int64(), true
	case v.Cmp(in) > 0:
		return in.Int64(), exact
	}
	return v.Int64(), exact
}
