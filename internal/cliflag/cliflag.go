package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// Parse parses args with fs, which must be ContinueOnError. On -h or --help
// it writes fs's usage to stdout and returns flag.ErrHelp (Exit treats it as
// success). Any other parse error comes back as one line that names the flag
// and, for a duration given without a unit ("30"), says to give one.
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package would print the error and the whole usage
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return flag.ErrHelp
	}
	return explain(fs, err)
}

// badValue is the flag package's error for a value its flag cannot parse.
var badValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): `)

// explain rewrites the flag package's parse errors into one line that says
// what to do.
func explain(fs *flag.FlagSet, err error) error {
	m := badValue.FindStringSubmatch(err.Error())
	if m != nil {
		if f := fs.Lookup(m[2]); f != nil && isDuration(f) {
			return fmt.Errorf("-%s %q: a duration needs a unit, e.g. %s (units: ns, us, ms, s, m, h)", m[2], m[1], example(m[1]))
		}
	}
	return fmt.Errorf("%w (see -help)", err)
}

// isDuration reports whether f holds a time.Duration.
func isDuration(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, ok = g.Get().(time.Duration)
	return ok
}

// example suggests a duration for a value given without a unit: "30"
// becomes "30s"; anything else "30s".
func example(v string) string {
	if _, err := time.ParseDuration(v + "s"); err == nil && v != "" {
		return v + "s"
	}
	return "30s"
}

// Exit ends the command named name with err: exit status 0 for nil and
// flag.ErrHelp, otherwise "name: err" on standard error and status 1. An
// error whose text already starts with "name: " is not prefixed again.
func Exit(name string, err error) {
	if code := Report(os.Stderr, name, err); code != 0 {
		os.Exit(code)
	}
}

// Report writes err as Exit does to w and returns the exit status Exit
// uses.
func Report(w io.Writer, name string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	msg := strings.TrimPrefix(err.Error(), name+": ")
	fmt.Fprintf(w, "%s: %s\n", name, msg)
	return 1
}
