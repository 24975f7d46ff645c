package llmd

// verdict is how kvroute stands to an llm-d plugin type it does not
// translate: the Kind and Note of the Finding a plugin of that type makes.
type verdict struct {
	kind Kind
	note string
}

// Notes shared by several plugin types.
const (
	noteDetector   = "kvroute's admission judges saturation by its own accounting (--admission-config saturation.maxPrefillBacklog, saturation.maxOpenRequests) and, with --engine-metrics-config, the engines' vLLM queue and KV-cache metrics"
	noteUsageLimit = "kvroute holds sheddable requests per endpoint while its engine lacks headroom (--admission-config headroom: maxWaiting, maxKVCache, with --engine-metrics-config); higher bands are never held"
	noteParser     = "kvroute reads the request body itself, by the request path (OpenAI completions and chat, Anthropic Messages, OpenAI Responses)"
	noteDiscovery  = "kvroute routes to the endpoints it is given (kvroute-epp: the InferencePool's pods or --endpoints) and subscribes to their KV events itself"
	noteMetrics    = "kvroute does not score by scraped engine metrics; " + noteLoad + " (kvroute-epp scrapes the engines' vLLM metrics, --engine-metrics-config, only for its admission stage and LoRA scorer)"
)

// catalog holds the llm-d router's plugin types that kvroute does not
// translate, by type name. A type not listed is an llm-d or third-party
// plugin kvroute has no equivalent for.
var catalog = map[string]verdict{
	// Pickers and profile handlers.
	"max-score-picker":                 {NotNeeded, "kvroute's pick stage always takes the highest total score, ties broken by a hash of the request's first new block and the endpoint, the same on every replica"},
	"random-picker":                    {NoEquivalent, "kvroute always picks the highest total score"},
	"weighted-random-picker":           {NoEquivalent, "kvroute always picks the highest total score"},
	"single-profile-handler":           {NotNeeded, "kvroute picks once, in one role, among every candidate, unless a host passes a kvroute.Profile"},
	"data-parallel-profile-handler":    {Different, "kvroute routes to each data-parallel rank as an endpoint of its own"},
	"header-profile-handler":           {NoEquivalent, "kvroute runs no profile chosen by a request header; " + notePD},
	"prefill-header-handler":           {NotNeeded, noteHeaders},
	"disagg-headers-handler":           {NotNeeded, noteHeaders},
	"encode-filter":                    {NoEquivalent, noteEncode},
	"always-disagg-multimodal-decider": {NoEquivalent, noteEncode},

	// Scorers kvroute replaces with its token-load scorer and affinity filter.
	"kv-cache-utilization-scorer":  {Different, noteMetrics},
	"queue-scorer":                 {Different, noteMetrics},
	"active-request-scorer":        {Different, noteLoad},
	"running-requests-size-scorer": {Different, noteMetrics},
	"load-aware-scorer":            {Different, noteMetrics},
	"prefix-cache-scorer":          {Different, "kvroute scores no prefix: its prefix-cache affinity filter keeps the cache-warm endpoints and the token-load scorer discounts each endpoint's cached prefix"},
	"approx-prefix-cache-producer": {Different, "kvroute knows the caches precisely, from the engines' KV events; it does not approximate them"},
	"no-hit-lru-scorer":            {NoEquivalent, "kvroute spreads cache misses by load, not by least recent use"},
	"lmetric-scorer":               {NoEquivalent, ""},

	// Session affinity (the session-affinity scorer and filter and the
	// session-id-producer are translated: sessionaff.go, sessionid.go; so
	// is the lora-affinity-scorer: loraaff.go).

	// Admission and flow control (the flowControl feature gate and section
	// are translated: flowcontrol.go).
	"utilization-detector":           {Different, noteDetector},
	"concurrency-detector":           {Different, "kvroute saturates an endpoint at its own open requests (--admission-config saturation.maxOpenRequests) and admits while any candidate is below it; llm-d compares the pool's average with maxConcurrency. " + noteDetector},
	"latency-slo-admitter":           {NoEquivalent, "kvroute admits by priority and saturation, not by predicted latency: " + noteAdmission},
	"probabilistic-admitter":         {NoEquivalent, "kvroute sheds sheddable requests (negative priority) only when every candidate is saturated, never at random: " + noteAdmission},
	"fcfs-ordering-policy":           {Different, "--admission-config ordering: fcfs (kvroute's default)"},
	"edf-ordering-policy":            {Different, "--admission-config ordering: earliest_deadline"},
	"slo-deadline-ordering-policy":   {Different, "--admission-config ordering: earliest_deadline, with each objective's queueTimeout as its deadline"},
	"round-robin-fairness-policy":    {Different, "--admission-config fairness: round_robin (kvroute's default), or deficit_round_robin to share prompt tokens"},
	"global-strict-fairness-policy":  {Different, "kvroute's flows of one band take turns (--admission-config fairness: round_robin or deficit_round_robin); it has no global first-come order across flows"},
	"static-usage-limit-policy":      {Different, noteUsageLimit},
	"priority-holdback-policy":       {Different, noteUsageLimit},
	"soft-reflective-ceiling-policy": {Different, noteUsageLimit},

	// The data layer and discovery.
	"endpoint-notification-source": {NotNeeded, noteDiscovery},
	"k8s-notification-source":      {NotNeeded, noteDiscovery},
	"file-discovery":               {Different, "endpoints come from kvroute-epp's --endpoints or the gateway's --endpoints-file"},
	"metrics-data-source":          {Different, noteMetrics},
	"core-metrics-extractor":       {Different, noteMetrics},
	"models-data-source":           {NotNeeded, "kvroute serves one base model (model) and its LoRA adapters"},
	"models-data-extractor":        {NotNeeded, "kvroute serves one base model (model) and its LoRA adapters"},

	// Parsers.
	"openai-parser":      {Different, noteParser},
	"passthrough-parser": {Different, noteParser},
	"anthropic-parser":   {Different, noteParser},
	"vllmhttp-parser":    {Different, noteParser},
	"vllmgrpc-parser":    {NoEquivalent, "kvroute reads HTTP request bodies only"},
	"sglanghttp-parser":  {Different, noteParser},
	"vertexai-parser":    {NoEquivalent, ""},

	// Testing hooks.
	"header-based-testing-filter":          {Different, "kvroute-epp's --conformance-test-hooks: the test-epp-endpoint-selection request header chooses the candidates"},
	"destination-endpoint-served-verifier": {Different, "kvroute-epp's --conformance-test-hooks: the served endpoint is reported in x-conformance-test-served-endpoint"},
}

// Notes of the EndpointPickerConfig's own keys and of the scheduling
// profiles (used by picker.go).
const (
	noteGates      = "kvroute has no feature gates: what it implements is always on, and what it does not is reported on its own key"
	noteProfiles   = "kvroute runs one scheduling profile, the first (or a P/D profile handler's decode profile), unless a host passes a kvroute.Profile; " + notePD
	noteNoFilter   = "kvroute's prefix-cache affinity filter always runs before its scorers, with affinity.* (kvroute's defaults unless a prefix-cache-affinity-filter plugin sets them)"
	noteNoScorer   = "kvroute's token-load scorer always scores, weighted by loadWeight (default 1)"
	notePrefixSc   = "kvroute scores no prefix: its prefix-cache affinity filter keeps the cache-warm endpoints and the token-load scorer discounts each endpoint's cached prefix, so this weight has no counterpart"
	noteWeightOnly = "weights apply to scorers; kvroute's affinity filter has none"
	noteNoProducer = "no precise-prefix-cache-producer: kvroute keeps its precise index from the engines' KV events anyway, with kvroute's defaults (blockSize 64, events on port 5556, replay on 5559)"
	noteCrowding   = "kvroute's filter also has a crowding rule, which llm-d's has not: a request leaves warm endpoints crowded with open requests for one where it re-prefills little more (affinity.crowdingRatio, default 1.5; 0 turns it off in a kvroute configuration)"
	noteZeroWeight = "a zero weight mutes the scorer in llm-d; kvroute's token-load scorer always scores, and loadWeight 0 means its default, 1"
)
