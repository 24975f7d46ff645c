package endpointid

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxBytes is the longest endpoint ID kvroute takes: a DNS name's 253
// bytes, ":" and a five-digit port. Every IP address with its port (an IPv6
// one in brackets, with a zone) fits too.
const MaxBytes = 253 + 1 + 5

// quoteBytes is how much of a refused ID an error shows.
const quoteBytes = 64

// Check returns an error saying what is wrong with id as an endpoint ID's
// size and encoding: empty, over MaxBytes, or not valid UTF-8 (a metric
// label value must be). It does not check the host:port form.
func Check(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty endpoint id")
	case len(id) > MaxBytes:
		return fmt.Errorf("endpoint id %s is %d bytes, over %d", Quote(id), len(id), MaxBytes)
	case !utf8.ValidString(id):
		return fmt.Errorf("endpoint id %s is not valid UTF-8", Quote(id))
	}
	return nil
}

// Quote returns id quoted for an error message, cut to its first 64 bytes
// (marked with "...") when longer, so that an error about a huge ID stays
// small.
func Quote(id string) string {
	if len(id) <= quoteBytes {
		return strconv.Quote(id)
	}
	return strconv.Quote(id[:quoteBytes]) + "..."
}
