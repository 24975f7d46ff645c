package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/kvroute/kvroute/bench/internal/sim"
)

// overloadOptions are the flags of the overload study (-overload).
type overloadOptions struct {
	on       bool
	requests int
	loads    string
	kvroute  string  // the kvroute rows' routing policy ("" = kvroute's default)
	policies string  // comma-separated overload policies ("" = all)
	capacity float64 // requests/s; 0 = measured
}

// runOverload is -overload: the admission-under-overload study, written as
// routesim-overload.md and routesim-overload.json. -seed, -engines,
// -blocks, -event-delay and -parallel apply; -overload-requests and
// -overload-loads set its length and loads.
func runOverload(o options, base sim.Config, args []string, stdout io.Writer) error {
	loads, err := parseLoads(o.overload.loads)
	if err != nil {
		return err
	}
	oc := sim.DefaultOverloadConfig(1)
	oc.Base.Seed, oc.Base.Fleet, oc.Base.EventDelay = base.Seed, base.Fleet, base.EventDelay
	oc.Admission = sim.DefaultOverloadAdmission(base.Fleet)
	oc.Workload.Requests = o.overload.requests
	oc.Capacity = o.overload.capacity
	if o.overload.kvroute != "" {
		if oc.KVRoute, err = sim.ParsePolicy(o.overload.kvroute); err != nil {
			return err
		}
	}
	policies := sim.AllOverloadPolicies
	if o.overload.policies != "" {
		policies = nil
		for _, s := range strings.Split(o.overload.policies, ",") {
			p, err := sim.ParseOverloadPolicy(strings.TrimSpace(s))
			if err != nil {
				return err
			}
			policies = append(policies, p)
		}
	}
	st, err := sim.RunOverloadStudy(oc, loads, policies, o.parallel)
	if err != nil {
		return err
	}
	command := strings.TrimSpace("go run ./bench/cmd/routesim " + strings.Join(args, " "))
	if err := writeFile(filepath.Join(o.out, "routesim-overload.md"), func(f io.Writer) error {
		return sim.WriteOverloadMarkdown(f, st, command)
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.out, "routesim-overload.json"), func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"command": command, "study": st})
	}); err != nil {
		return err
	}
	met, rows := 0, 0
	for _, t := range st.Targets {
		if !t.NA {
			rows++
		}
		if t.Met && !t.NA {
			met++
		}
	}
	fmt.Fprintf(stdout, "overload study: capacity %.1f requests/s, %d/%d target rows met; wrote %s\n", st.Config.Capacity, met, rows, filepath.Join(o.out, "routesim-overload.md"))
	return nil
}
