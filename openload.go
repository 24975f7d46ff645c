package kvroute

import "math"

// committed is candidate i's load in the token-load score: its committed
// in-flight tokens plus the token-equivalent load of its open requests
// (Config.OpenRequestTokens each), saturating at math.MaxInt64.
func (st *pickState) committed(i int) int64 {
	tok := max(st.cands[i].InFlightTokens, 0)
	return tok + min(st.open[i], math.MaxInt64-tok)
}
