package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/kvroute/kvroute/contrib/k8s"
)

// The llm-d router's endpoint picker flags (its pkg/epp/server Options)
// that flags.go does not define under kvroute's own names, so that llm-d's
// router chart starts kvroute-epp with the arguments it passes its own
// picker: --config-file and --config-text (configfile.go), and
// --endpoint-selector, whose pods on --endpoint-target-ports
// (upstreamflags.go) are the endpoints instead of an InferencePool's
// (poolDiscovery), --ha-enable-leader-election (leader.go), and
// --tracing (tracing.go).

// llmdFlags holds the llm-d router picker's flags of this file.
type llmdFlags struct {
	configFile string // --config-file, moved into flags.configPath by checkLLMDFlags
	configText string // --config-text: the router configuration inline

	endpointSelector string  // --endpoint-selector: the pool as a label selector
	targetPorts      []int32 // --endpoint-target-ports, deduplicated by checkLLMDFlags

	leaderElection bool   // --ha-enable-leader-election (leader.go)
	leaseName      string // --ha-lease-name

	tracing tracingFlag // --tracing: export spans over OTLP (tracing.go)
}

// maxTargetPorts bounds --endpoint-target-ports, as llm-d's picker does.
const maxTargetPorts = 8

// addLLMDFlags defines the llm-d router picker's flags of this file on fs.
func addLLMDFlags(fs *flag.FlagSet, f *flags) {
	fs.StringVar(&f.configFile, "config-file", "", "the llm-d router picker's name for --config: the router configuration file (set one of the two)")
	fs.StringVar(&f.endpointSelector, "endpoint-selector", "", "the llm-d router picker's standalone pool: a Kubernetes label selector of the engine pods in --pool-namespace, whose --endpoint-target-ports are the endpoints (instead of --pool-name's InferencePool or --endpoints)")
	fs.BoolVar(&f.leaderElection, "ha-enable-leader-election", false, "the llm-d router picker's high availability: the replicas compete for a coordination.k8s.io Lease in --pool-namespace and only its holder is ready (the others stand by, not ready, and take over when it goes), so that one picker sees all the load; needs --pool-name or --endpoint-selector")
	fs.StringVar(&f.leaseName, "ha-lease-name", "", "with --ha-enable-leader-election, the Lease's name (default: llm-d's, epp-<pool namespace>-<pool name, or with --endpoint-selector the Deployment of $POD_NAME>.llm-d.ai)")
	f.tracing.on = true // llm-d's default
	fs.Var(&f.tracing, "tracing", "export spans over OTLP to the collector OTEL_EXPORTER_OTLP_ENDPOINT names, as llm-d's router picker does: over gRPC and sampling a tenth of new traces unless the OTEL_* variables say otherwise; nothing is exported without an endpoint")
	fs.StringVar(&f.configText, "config-text", "", "the router configuration inline, read as a --config file is (YAML or JSON, kvroute's keys or an llm-d EndpointPickerConfig whole); instead of --config or --config-file")
}

// checkLLMDFlags checks the flags of this file once fs is parsed and
// settles --config-file into configPath.
func checkLLMDFlags(f *flags) error {
	if f.configFile != "" {
		if f.configPath != "" {
			return errors.New("--config and --config-file both name the configuration file; set one of them")
		}
		f.configPath = f.configFile
	}
	if f.configText != "" && f.configPath != "" {
		return fmt.Errorf("--config-text and --%s both give the configuration; set one of them", configFlagName(f))
	}
	if f.leaseName != "" && !f.leaderElection {
		return errors.New("--ha-lease-name names the Lease of --ha-enable-leader-election, which is not set")
	}
	if f.leaderElection && f.poolName == "" && f.endpointSelector == "" {
		return errors.New("--ha-enable-leader-election elects among the replicas of a pool's picker: set --pool-name or --endpoint-selector")
	}
	if f.endpointSelector == "" {
		return nil
	}
	if f.poolName != "" || f.endpoints != "" {
		return errors.New("--endpoint-selector and --pool-name or --endpoints both give the endpoints; set one of them")
	}
	if _, err := labels.Parse(f.endpointSelector); err != nil {
		return fmt.Errorf("--endpoint-selector %q: %w", f.endpointSelector, err)
	}
	var ports []int32
	for _, p := range f.targetPorts {
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 || len(ports) > maxTargetPorts {
		return fmt.Errorf("--endpoint-selector needs --endpoint-target-ports with 1 to %d ports, not %d", maxTargetPorts, len(ports))
	}
	f.targetPorts = ports
	f.ignored = slices.DeleteFunc(f.ignored, func(n string) bool { return n == "endpoint-target-ports" }) // honoured here
	return nil
}

// tracingFlag is --tracing: a boolean flag that remembers whether it was
// given.
type tracingFlag struct{ on, given bool }

func (t *tracingFlag) IsBoolFlag() bool { return true }

func (t *tracingFlag) String() string {
	if t == nil {
		return "true"
	}
	return strconv.FormatBool(t.on)
}

func (t *tracingFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is neither true nor false", s)
	}
	t.on, t.given = v, true
	return nil
}

// poolDiscovery is the discovery configuration of the engines' pool:
// --pool-name's InferencePool or --endpoint-selector's pods on
// --endpoint-target-ports, in --pool-namespace; false when the endpoints
// are --endpoints' static list.
func poolDiscovery(f flags) (k8s.Config, bool) {
	switch {
	case f.endpointSelector != "":
		return k8s.Config{Namespace: f.poolNamespace, Selector: f.endpointSelector, TargetPorts: f.targetPorts, RoleLabel: f.roleLabel}, true
	case f.poolName != "":
		version := "v1"
		if f.poolGroup == k8s.PoolV1Alpha2.Group {
			version = "v1alpha2"
		}
		return k8s.Config{Namespace: f.poolNamespace, Pool: f.poolName, PoolVersion: version, RoleLabel: f.roleLabel}, true
	}
	return k8s.Config{}, false
}

// configFlagName is the flag that named f's configuration file.
func configFlagName(f *flags) string {
	if f.configFile != "" {
		return "config-file"
	}
	return "config"
}
