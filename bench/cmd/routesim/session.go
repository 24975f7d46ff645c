package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/kvroute/kvroute/bench/internal/sim"
)

// sessionOptions are the flags of the session-affinity study (-session).
type sessionOptions struct {
	on       bool
	requests int
	loads    string
}

// runSession is -session: kvroute with and without session affinity, and
// under Dynamo's session TTL rule, on multi-turn and agent traffic,
// written as routesim-session.md and routesim-session.json. -seed,
// -engines, -blocks and -parallel apply; the study runs one gateway
// replica (a session store per replica would otherwise split each
// session's state in two).
func runSession(o options, base sim.Config, args []string, stdout io.Writer) error {
	loads, err := parseLoads(o.session.loads)
	if err != nil {
		return err
	}
	base.GatewayReplicas = 1
	rs, err := sim.RunSessionStudy(base, sim.SessionScenarios(o.session.requests), loads, sim.SessionPolicies, o.parallel)
	if err != nil {
		return err
	}
	command := strings.TrimSpace("go run ./bench/cmd/routesim " + strings.Join(args, " "))
	if err := writeFile(filepath.Join(o.out, "routesim-session.md"), func(f io.Writer) error {
		return sim.WriteSessionMarkdown(f, rs, base, command)
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.out, "routesim-session.json"), func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"command": command, "results": rs})
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "session study: %d runs; wrote %s\n", len(rs), filepath.Join(o.out, "routesim-session.md"))
	return nil
}
