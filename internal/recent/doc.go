// Package recent keeps the latest few records of something a status page
// lists (the gateway's routed requests, the ext_proc picker's streams): a
// fixed ring of Size records, safe for concurrent use, whose memory does not
// grow with traffic.
package recent
