package models

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A negative poll setting is refused by its own key and value: the error
// once read "poll: negative interval, timeout or maxModels", whichever of
// the three it was, from Validate and from NewPoller alike.
func TestPollErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct {
		poll PollConfig
		err  string
	}{
		{PollConfig{Interval: -time.Second}, "poll.interval -1s is negative"},
		{PollConfig{Timeout: -250 * time.Millisecond}, "poll.timeout -250ms is negative"},
		{PollConfig{MaxModels: -1}, "poll.maxModels -1 is negative"},
		// Past ten years 2 × interval (the idle timeout of the poller's
		// connections) would come near overflowing time.Duration.
		{PollConfig{Interval: 200 * 365 * 24 * time.Hour}, "poll.interval 1752000h0m0s is over 87600h0m0s"},
		{PollConfig{Timeout: 87601 * time.Hour}, "poll.timeout 87601h0m0s is over 87600h0m0s"},
	} {
		err := Config{Poll: c.poll}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.ErrorContains(t, err, c.err)
		_, err = NewPoller(c.poll, Options{})
		require.ErrorContains(t, err, "models: "+c.err)
	}
	require.NoError(t, Config{Poll: PollConfig{Enabled: true, Interval: time.Second, Timeout: time.Second, MaxModels: 1}}.Validate())
	require.NoError(t, Config{Poll: PollConfig{Interval: 87600 * time.Hour, Timeout: 87600 * time.Hour}}.Validate(), "ten years")
	// From a file, a value over the bound names its path.
	var c Config
	require.NoError(t, c.UnmarshalJSON([]byte(`{"poll":{"interval":"1500000h"}}`)))
	require.ErrorContains(t, c.Validate(), "poll.interval 1500000h0m0s is over 87600h0m0s")
}
