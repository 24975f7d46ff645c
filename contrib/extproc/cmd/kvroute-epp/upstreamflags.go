package main

import (
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
)

// The Inference Extension picker's flags that flags.go does not define
// under kvroute's own names: --health-checking, which kvroute-epp honours,
// --zap-log-level, honoured as --log-level, and the flags that cannot apply
// to kvroute-epp, accepted so that the upstream manifests start it and
// logged once at start as ignored, with why (ignoredFlags); among them
// --endpoint-target-ports, honoured with --endpoint-selector (llmdflags.go).

// ignoredFlags are the upstream flags kvroute-epp accepts and ignores, each
// with why it cannot apply.
var ignoredFlags = map[string]string{
	"endpoint-target-ports": "without --endpoint-selector the engines' ports are the InferencePool's targetPorts (--pool-name) or each --endpoints ip:port; the upstream pickers do not use the flag with --pool-name either",
	"zap-devel":             "kvroute-epp has no development log mode: the format is --zap-encoder's and the level --log-level's (or --zap-log-level's)",
	"zap-stacktrace-level":  "kvroute-epp's log lines carry no stack traces",
	"zap-time-encoding":     "kvroute-epp writes log times in RFC 3339 (console) or RFC 3339 with nanoseconds (json)",
}

// addUpstreamFlags defines the upstream flags of this file on fs.
func addUpstreamFlags(fs *flag.FlagSet, f *flags) {
	fs.BoolVar(&f.healthChecking, "health-checking", true, "serve the gRPC health service on the ext_proc port too, as kvroute-epp always has and the Inference Extension picker's --health-checking does; false leaves only the ext_proc service there (--grpc-health-port serves health either way)")
	fs.Func("zap-log-level", "the Inference Extension picker's name for --log-level: debug, info, error, panic (nothing is logged), or an integer above 0 (debug)", func(s string) error {
		lvl, err := zapLogLevel(s)
		if err == nil {
			f.logLevel = lvl
		}
		return err
	})
	fs.Func("endpoint-target-ports", "with --endpoint-selector, the engines' ports: comma-separated ports 1 to 65535, at most 8, a port's place its data-parallel rank (otherwise accepted and ignored: "+ignoredFlags["endpoint-target-ports"]+")", func(s string) error {
		for p := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("%q is not a port from 1 to 65535", p)
			}
			f.targetPorts = append(f.targetPorts, int32(n))
		}
		return nil
	})
	fs.Bool("zap-devel", false, "accepted and ignored: "+ignoredFlags["zap-devel"])
	fs.Func("zap-stacktrace-level", "accepted and ignored, one of info, warn, error, panic: "+ignoredFlags["zap-stacktrace-level"],
		oneOf("info", "warn", "error", "panic"))
	fs.Func("zap-time-encoding", "accepted and ignored, one of epoch, millis, nano, iso8601, rfc3339, rfc3339nano: "+ignoredFlags["zap-time-encoding"],
		oneOf("epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano"))
}

// zapLogLevel is the --log-level of a controller-runtime --zap-log-level.
func zapLogLevel(s string) (string, error) {
	switch l := strings.ToLower(s); l {
	case "debug", "info", "warn", "error":
		return l, nil
	case "panic":
		return "error+4", nil // above every level kvroute-epp logs at
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return "debug", nil // zap's levels below debug; kvroute-epp has none finer
	}
	return "", fmt.Errorf("%q is none of debug, info, warn, error, panic or an integer above 0", s)
}

// oneOf is a flag.Func that accepts only vals (in any case).
func oneOf(vals ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(vals, strings.ToLower(s)) {
			return fmt.Errorf("%q is none of %s", s, strings.Join(vals, ", "))
		}
		return nil
	}
}

// setIgnoredFlags returns the ignored flags given on fs's command line, in
// order of name.
func setIgnoredFlags(fs *flag.FlagSet) []string {
	var set []string
	fs.Visit(func(fl *flag.Flag) {
		if _, ok := ignoredFlags[fl.Name]; ok {
			set = append(set, fl.Name)
		}
	})
	return set
}

// logIgnoredFlags logs, once each, the ignored flags the command line
// gave, with why they cannot apply.
func logIgnoredFlags(log *slog.Logger, names []string) {
	for _, n := range names {
		log.Warn("Inference Extension picker flag accepted and ignored", "flag", "--"+n, "why", ignoredFlags[n])
	}
}
