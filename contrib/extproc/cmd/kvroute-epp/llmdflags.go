package main

import (
	"errors"
	"flag"
	"fmt"
)

// The llm-d router's endpoint picker flags (its pkg/epp/server Options)
// that flags.go does not define under kvroute's own names, so that llm-d's
// router chart starts kvroute-epp with the arguments it passes its own
// picker: --config-file and --config-text (configfile.go).

// llmdFlags holds the llm-d router picker's flags of this file.
type llmdFlags struct {
	configFile string // --config-file, moved into flags.configPath by checkLLMDFlags
	configText string // --config-text: the router configuration inline
}

// addLLMDFlags defines the llm-d router picker's flags of this file on fs.
func addLLMDFlags(fs *flag.FlagSet, f *flags) {
	fs.StringVar(&f.configFile, "config-file", "", "the llm-d router picker's name for --config: the router configuration file (set one of the two)")
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
	return nil
}

// configFlagName is the flag that named f's configuration file.
func configFlagName(f *flags) string {
	if f.configFile != "" {
		return "config-file"
	}
	return "config"
}
