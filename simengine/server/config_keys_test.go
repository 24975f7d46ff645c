package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A setting out of range is refused by its own key and value: the errors
// once named three keys at once ("defaultMaxTokens, maxBodyBytes and
// maxModelLen must be positive", though maxModelLen 0 is valid), whichever
// was wrong.
func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct {
		edit func(*Config)
		err  string
	}{
		{func(c *Config) { c.DefaultMaxTokens = -1 }, "defaultMaxTokens -1 must be positive"},
		{func(c *Config) { c.MaxBodyBytes = -2 }, "maxBodyBytes -2 must be positive"},
		{func(c *Config) { c.MaxModelLen = -3 }, "maxModelLen -3 is negative"},
		{func(c *Config) { c.PD.TransferTimeout = -time.Second }, "pd transferTimeout -1s is negative"},
		{func(c *Config) { c.PD.LeaseTTL = -time.Minute }, "pd leaseTTL -1m0s is negative"},
		{func(c *Config) { c.PD.MaxLeases = -4 }, "pd maxLeases -4 is negative"},
	} {
		cfg := Config{Model: "m"}
		c.edit(&cfg)
		_, err := New(cfg, Options{})
		require.ErrorContains(t, err, c.err)
	}
}
