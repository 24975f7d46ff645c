package main

import (
	"strings"
)

// servedNameFlag is the flag that takes the served model names.
const servedNameFlag = "served-model-name"

// servedNames is --served-model-name, vLLM's list of the names the model is
// served under: the first becomes server.Config.Model, the rest
// server.Config.ServedModelAliases. It takes the names in every form a
// launch line may give them: several arguments after the flag as vLLM takes
// them (--served-model-name a b; spreadServedNames), one value separated by
// commas or spaces ("a,b", "a b", "a, b"), or the flag repeated. An empty
// name between two commas is kept, for server.New to refuse by name.
type servedNames []string

// String returns the names given so far, comma-separated.
func (n *servedNames) String() string { return strings.Join(*n, ",") }

// Set adds the names of one value of the flag.
func (n *servedNames) Set(v string) error {
	for _, piece := range strings.Split(v, ",") {
		names := strings.Fields(piece)
		if len(names) == 0 {
			names = []string{""}
		}
		*n = append(*n, names...)
	}
	return nil
}

// spreadServedNames rewrites vLLM's form of the flag, several arguments
// after it (--served-model-name a b), into the flag once per name, which
// Go's flag package reads. The arguments it takes are those up to the next
// one starting with "-"; simengine takes no positional arguments, so none
// of them could have meant anything else. Arguments after "--" are left
// alone.
func spreadServedNames(args []string) []string {
	out := make([]string, 0, len(args))
	in := false // the previous argument was the flag's value
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case a == "-"+servedNameFlag || a == "--"+servedNameFlag:
			out = append(out, a)
			if i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			in = true
			continue
		case strings.HasPrefix(a, "-"+servedNameFlag+"=") || strings.HasPrefix(a, "--"+servedNameFlag+"="):
			out = append(out, a)
			in = true
			continue
		case in && !strings.HasPrefix(a, "-"):
			out = append(out, "--"+servedNameFlag, a)
			continue
		}
		in = false
		out = append(out, a)
	}
	return out
}
