package cluster

// CloseWithoutCleanup stops the replica the way a crash looks to its peers:
// its goroutines end, but its record and membership stay in Redis until the
// lease expires.
func CloseWithoutCleanup(r *Replica) {
	r.cleanup = false
	r.Close()
}

// DecodeRecord decodes a replica's record as read from Redis.
func DecodeRecord(data []byte) (Record, error) { return decodeRecord(data, DefaultMaxEndpoints) }
