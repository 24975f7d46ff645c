package main

import "fmt"

// The flags that restrict the prefillers the sidecar contacts: the pod
// network's CIDRs (a single IP is a /32) and the prefillers' port. Ports
// alone would restrict nothing, so they are refused without networks.
func Example() {
	o, err := parseFlags([]string{"--decoder", "http://127.0.0.1:8001", "--prefill-timeout", "2s",
		"--allowed-prefiller-networks", "10.244.0.0/16, 192.168.1.7", "--allowed-prefiller-ports", "8000"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(o.cfg.DecoderURL, o.cfg.PrefillTimeout, o.allowNets, o.allowPorts)
	_, err = parseFlags([]string{"--allowed-prefiller-ports", "8000"})
	fmt.Println(err)
	// Output:
	// http://127.0.0.1:8001 2s [10.244.0.0/16 192.168.1.7/32] [8000]
	// --allowed-prefiller-ports needs --allowed-prefiller-networks
}
