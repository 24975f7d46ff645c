package simengine

// CachedTokens returns how many leading tokens of prompt the engine's
// prefix cache holds right now (whole blocks, without a cache salt or LoRA
// adapter; in hybrid mode, the prefix every cache group can serve): what a
// request with this prompt would find cached, before vLLM's rule that the
// last prompt token is always computed. It is the
// ground truth a router's index is checked against in tests and the
// routing simulation.
func (e *Engine) CachedTokens(prompt []uint32) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	bs := e.cfg.BlockSize
	parent := NoneHash
	var hashes []Digest
	for i := 0; (i+1)*bs <= len(prompt); i++ {
		d := e.hasher.hash(parent, prompt[i*bs:(i+1)*bs], nil)
		if _, ok := e.pool.lookup(gkey{e.fullGroupLocked(), d}); !ok {
			break
		}
		parent, hashes = d, append(hashes, d)
	}
	if e.hy != nil {
		return e.hy.usable(hashes, len(hashes), bs) * bs
	}
	return len(hashes) * bs
}
