// Package k8s discovers kvroute endpoints from the Kubernetes API: the Ready
// pods of a Gateway API Inference Extension InferencePool (its label
// selector and target ports), or of a plain label selector, watched with
// client-go informers.
//
// Each Ready pod yields one endpoint per target port, "podIP:port" as its ID
// (the identity vLLM's KV events are attributed to), the pod's labels (for
// the event-subscription selector) and the port's index as its data-parallel
// rank: vLLM started with data parallelism serves rank r on the r-th port and
// offsets its KV-event ports by r. The engine's event and replay ports can be
// given per pod in annotations (kvroute.io/kv-events-port,
// kvroute.io/kv-replay-port); without them the router derives them from its
// configuration. A pod whose data-parallel ranks are not all up lists the
// target ports it serves in llm-d's llm-d.ai/active-ports annotation (or
// the Inference Extension's inference.networking.k8s.io/active-ports), as
// both projects' pickers read it: comma-separated, each port keeping its
// rank; the other target ports give it no endpoint (an annotation that
// lists no port, "", gives it none, and is reported as a problem). Two Ready pods that
// would give the same endpoint ID (hostNetwork pods on one node serving
// one port, of which only one can hold it; the other's readiness probe may
// reach the first's server) give it once: the pod created first keeps it,
// and the other is left out, as not ready, until the first leaves. A pod that is deleted, becomes un-Ready, loses its IP or is
// relabelled out of the selector leaves the endpoint set, and the router
// then drops its subscription and its index entries.
//
// The pods are listed and watched with the followed selector (the
// configured one, or the InferencePool's), so that the informer's cache
// holds the pool's pods only, not every pod of the namespace. When the
// pool's selector changes, its pods are listed anew with the new one (the
// informer of the old selector is stopped); the endpoint set stays as it
// was until that list is in, then follows the new selector.
//
// Changes reach the Sink debounced: any number of informer events within the
// debounce interval cause at most one recomputation, and the Sink is called
// only when the endpoint set actually changed, so a resync storm costs one
// comparison, not one SetEndpoints per pod. After a Sink error
// (Router.SetEndpoints returns one with the set applied when a
// subscription fails) the next recomputation calls the Sink whether or not
// the set changed, until a call succeeds; see Sink.
//
// The same Discovery, given a selector of its own, feeds a separate render
// pool (a Deployment of vLLM renderers, as used in front of SGLang fleets) to
// the router's render client, which then keeps its round robin and its one
// retry on another endpoint.
//
// # Reading InferencePools without their Go module
//
// The Inference Extension's Go module is not served by the module proxy
// kvroute builds against, so InferencePool objects are read through
// client-go's dynamic client and decoded into the small InferencePool struct
// of this package. Both the v1 API (inference.networking.k8s.io:
// spec.selector.matchLabels, spec.targetPorts[].number) and the older
// v1alpha2 API (inference.networking.x-k8s.io: spec.selector as a plain map,
// spec.targetPortNumber) are understood.
//
// A pool that is missing, being deleted (its deletionTimestamp set while
// finalizers are pending, as the Inference Extension's picker treats it)
// or unusable (an empty or invalid selector, no target port) gives no
// endpoint: the set is empty, PoolError says why, and the warning is
// logged once per reason.
//
// A cluster without the pool's CRD (the API server answers NotFound for
// the resource) is reported the same way, once, as "InferencePool CRD
// <group/version> not installed", in place of client-go's error at each
// retry: Start does not wait for that informer's cache, and the informer
// keeps retrying with its backoff, so that the pool is followed once the
// CRD is installed. A retry that fails otherwise (an API server that does
// not answer, a refusal) says nothing of the CRD: until one is answered,
// the reason is that failure ("InferencePool CRD <group/version>:
// InferencePools cannot be listed: ..."), not the CRD installed.
//
// Every other list or watch error (a ServiceAccount without list or watch
// on the pods or the pool, an API server that does not answer) keeps Start
// waiting, as client-go retries; SyncError gives the last one meanwhile, so
// that a host's readiness can say why the caches have not synced.
//
// # Metrics
//
// With a Registerer in Options, discovery exports the size of the set it
// last computed (kvroute_k8s_discovery_endpoints), the endpoints and the
// pods left out over MaxEndpoints (whole pods: never some of one pod's
// data-parallel ranks), whether the followed InferencePool is unusable, the
// Ready pods whose labels or annotations it works around
// (kvroute_k8s_discovery_pod_problems{reason}: a malformed port annotation,
// an unknown role label, model names left out, the pods left out for a
// status.podIP that is no IP address or for an endpoint ID another pod
// already has, and active-ports entries that are no target port or an
// active-ports annotation that lists no port, which leaves the pod out)
// and the sets the Sink returned an error for. The gauges are set at every recompute, so they show the
// present state, not a count of recomputes; the warning logged for a pod's
// problem is logged once per value (when the pod first shows it, or the
// value changes), not at every recompute. Two Discoveries on one registry
// (the picker's pool and its renderers) need constant labels apart
// (telemetry.Set.With).
//
// # Dependencies
//
// This is a module of its own so that kvroute's core module does not depend
// on client-go (k8s.io/client-go, k8s.io/api, k8s.io/apimachinery).
//
// # Testing
//
// There is no API server binary where kvroute is tested; the tests drive real
// informers against client-go's fake clientsets, the standard way Kubernetes
// controllers are tested.
package k8s
