package affinity

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// MinCalibrationSamples is the least number of valid TTFT samples
// PeakPrefillThroughput accepts: with fewer, one slow or fast outlier moves
// the median too much.
const MinCalibrationSamples = 10

// Calibration errors; PeakPrefillThroughput wraps them with the details.
var (
	// ErrInvalidChunk: the chunk size is not a positive number of tokens.
	ErrInvalidChunk = errors.New("affinity: calibration chunk size must be > 0 tokens")
	// ErrTooFewSamples: fewer than MinCalibrationSamples positive TTFTs.
	ErrTooFewSamples = errors.New("affinity: too few valid calibration samples")
)

// PeakPrefillThroughput returns chunkTokens / median(ttfts) in tokens per
// second: the value for Config.PeakPrefillThroughput.
//
// ttfts are times to first token of sequential requests of exactly
// chunkTokens random token IDs (so every one misses the prefix cache and pays
// a full prefill) sent to an idle deployment; chunkTokens must equal the
// engine's effective --max-num-batched-tokens (vLLM default 8192), otherwise
// the value is silently wrong. Samples <= 0 are discarded as invalid; at least
// MinCalibrationSamples must remain. With an even number of samples the
// median is the mean of the two middle ones. ttfts is not modified. The
// result is always positive and finite.
func PeakPrefillThroughput(chunkTokens int, ttfts []time.Duration) (float64, error) {
	if chunkTokens <= 0 {
		return 0, fmt.Errorf("%w, got %d", ErrInvalidChunk, chunkTokens)
	}
	valid := make([]time.Duration, 0, len(ttfts))
	for _, d := range ttfts {
		if d > 0 {
			valid = append(valid, d)
		}
	}
	if len(valid) < MinCalibrationSamples {
		return 0, fmt.Errorf("%w: %d of %d samples are positive, need at least %d",
			ErrTooFewSamples, len(valid), len(ttfts), MinCalibrationSamples)
	}
	slices.Sort(valid)
	n := len(valid)
	medianNs := float64(valid[n/2])
	if n%2 == 0 {
		medianNs = (float64(valid[n/2-1]) + float64(valid[n/2])) / 2
	}
	// chunkTokens >= 1 and the median >= 1 ns, so the result is positive and
	// finite (at most chunkTokens × 1e9). Dividing by nanoseconds keeps the
	// arithmetic exact up to the final rounding.
	return float64(chunkTokens) * float64(time.Second) / medianNs, nil
}
