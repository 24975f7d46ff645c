package main

import (
	"context"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	require.False(t, o.Fast)
	require.Equal(t, 2, o.Engines)
	require.Zero(t, o.Interval, "the scenario's default (3 s) applies")
	require.Nil(t, o.Logger)

	o, err = parseFlags([]string{"--fast", "--interval", "250ms", "--engines", "3", "--load-requests", "10",
		"--engine-blocks", "256", "--load-groups", "4", "--hold", "--verbose"}, io.Discard)
	require.NoError(t, err)
	require.True(t, o.Fast)
	require.True(t, o.Hold)
	require.Equal(t, 250*time.Millisecond, o.Interval)
	require.Equal(t, 3, o.Engines)
	require.Equal(t, 10, o.LoadRequests)
	require.Equal(t, 256, o.EngineBlocks)
	require.Equal(t, 4, o.LoadGroups)
	require.NotNil(t, o.Logger)

	for _, bad := range [][]string{{"--engines", "0"}, {"--interval", "-1s"}, {"--load-requests", "-1"}, {"extra"}, {"--nope"}} {
		_, err := parseFlags(bad, io.Discard)
		require.Error(t, err, bad)
	}
	_, err = parseFlags([]string{"--help"}, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
}

func TestRunReportsBadOptions(t *testing.T) {
	err := run(context.Background(), []string{"--engine-blocks", "2"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "cannot hold")
}
