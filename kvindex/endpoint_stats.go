package kvindex

// EndpointBlocks returns how many engine blocks the index holds for the
// endpoint (stored by its events, speculative entries excluded); 0 for an
// unknown endpoint. It takes the endpoint's lock, so it is for status pages
// and tests, not for the request path.
func (ix *Index) EndpointBlocks(endpoint string) int {
	ep, _ := ix.lockEndpoint(endpoint, false)
	if ep == nil {
		return 0
	}
	defer ep.mu.Unlock()
	return ep.eng.Len()
}
