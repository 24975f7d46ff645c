// Package endpointid bounds the endpoint IDs kvroute takes from
// configuration and discovery.
//
// An endpoint ID ("ip:port" or "host:port" of an engine's inference port)
// becomes the pod_identifier label value of kvevents' per-endpoint series,
// the endpoint label of the engine-metrics scraper's, and a key of the
// index, the load tracker and the cluster state. A host has no length limit
// of its own in net.SplitHostPort, so one mistyped or hostile entry could
// make every series it labels megabytes long; Check holds IDs to what a DNS
// name and a port can take, in valid UTF-8, and Quote shows a refused one in
// an error without copying all of it.
package endpointid
