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
	} {
		err := Config{Poll: c.poll}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.ErrorContains(t, err, c.err)
		_, err = NewPoller(c.poll, Options{})
		require.ErrorContains(t, err, "models: "+c.err)
	}
	require.NoError(t, Config{Poll: PollConfig{Enabled: true, Interval: time.Second, Timeout: time.Second, MaxModels: 1}}.Validate())
}
