package otlpenv

import (
	"fmt"
	"strconv"
	"strings"
)

// samplerNames are the OTEL_TRACES_SAMPLER values the SDK's tracer provider
// understands, each saying whether it reads OTEL_TRACES_SAMPLER_ARG (a
// ratio).
var samplerNames = map[string]bool{
	"always_on": false, "always_off": false, "traceidratio": true,
	"parentbased_always_on": false, "parentbased_always_off": false, "parentbased_traceidratio": true,
}

// checkSampler refuses an OTEL_TRACES_SAMPLER the SDK does not know, and an
// OTEL_TRACES_SAMPLER_ARG that is not a ratio from 0 to 1 for a ratio
// sampler. The SDK only logs either and samples every trace instead (its
// default sampler, or a ratio of 1), so that a typo such as "10%" for 0.1
// would export ten times the spans the deployment asked for.
func checkSampler(getenv func(string) string) error {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	if name == "" {
		return nil
	}
	ratio, ok := samplerNames[name]
	if !ok {
		return fmt.Errorf("otlpenv: OTEL_TRACES_SAMPLER=%q is not a sampler the SDK supports (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)", name)
	}
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	if !ratio || arg == "" {
		return nil
	}
	if v, err := strconv.ParseFloat(arg, 64); err != nil || !(v >= 0 && v <= 1) {
		return fmt.Errorf("otlpenv: OTEL_TRACES_SAMPLER_ARG=%q is not a sampling ratio from 0 to 1", arg)
	}
	return nil
}
