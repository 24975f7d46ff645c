package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newSet() (*flag.FlagSet, *bytes.Buffer) {
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	var stderr bytes.Buffer
	fs.SetOutput(&stderr)
	fs.Duration("timeout", time.Second, "how long")
	fs.Int("count", 1, "how many")
	return fs, &stderr
}

// --help prints the usage to stdout and is success; nothing goes to the
// flag set's own output.
func TestHelpPrintsUsageToStdoutAndIsSuccess(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		fs, stderr := newSet()
		var stdout bytes.Buffer
		err := Parse(fs, []string{arg}, &stdout)
		require.ErrorIs(t, err, flag.ErrHelp)
		require.Contains(t, stdout.String(), "Usage of cmd:")
		require.Contains(t, stdout.String(), "-timeout duration")
		require.Empty(t, stderr.String())
		require.Equal(t, 0, Report(io.Discard, "cmd", err))
	}
}

// A duration without a unit says to give one, in one line without the
// usage; other bad flags keep the flag package's words and point to -help.
func TestBadFlagsAreOneLine(t *testing.T) {
	fs, stderr := newSet()
	err := Parse(fs, []string{"-timeout", "30"}, io.Discard)
	require.EqualError(t, err, `-timeout "30": a duration needs a unit, e.g. 30s (units: ns, us, ms, s, m, h)`)
	require.Empty(t, stderr.String(), "no usage dump")

	fs, _ = newSet()
	err = Parse(fs, []string{"--timeout=soon"}, io.Discard)
	require.EqualError(t, err, `-timeout "soon": a duration needs a unit, e.g. 30s (units: ns, us, ms, s, m, h)`)

	fs, stderr = newSet()
	err = Parse(fs, []string{"-count", "many"}, io.Discard)
	require.ErrorContains(t, err, `invalid value "many" for flag -count`)
	require.ErrorContains(t, err, "(see -help)")
	require.Empty(t, stderr.String())

	fs, _ = newSet()
	err = Parse(fs, []string{"-nope"}, io.Discard)
	require.ErrorContains(t, err, "flag provided but not defined: -nope (see -help)")

	fs, _ = newSet()
	require.NoError(t, Parse(fs, []string{"-timeout", "30s"}, io.Discard))
	require.Equal(t, 30*time.Second, fs.Lookup("timeout").Value.(flag.Getter).Get())
}

// An error is printed once with the command's name, however the error
// already names it.
func TestReportNamesTheCommandOnce(t *testing.T) {
	var b bytes.Buffer
	require.Equal(t, 1, Report(&b, "simengine", fmt.Errorf("simengine: %w", errors.New("listen: address in use"))))
	require.Equal(t, "simengine: listen: address in use\n", b.String())
	b.Reset()
	require.Equal(t, 1, Report(&b, "simengine", errors.New("bad --model")))
	require.Equal(t, "simengine: bad --model\n", b.String())
	require.Equal(t, 0, Report(&b, "x", nil))
}
