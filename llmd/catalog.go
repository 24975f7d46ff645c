package llmd

// verdict is how kvroute stands to an llm-d plugin type it does not
// translate: the Kind and Note of the Finding a plugin of that type makes.
type verdict struct {
	kind Kind
	note string
}

// Notes shared by several plugin types.
const (
	notePD        = "not yet in kvroute: prefill/decode disaggregation; a host can pick per role with a kvroute.Profile"
	noteAdmission = "not yet in kvroute: admission and flow control under overload"
	noteSession   = "not yet in kvroute: session affinity"
	noteParser    = "kvroute reads the request body itself, by the request path (OpenAI completions and chat, Anthropic Messages, OpenAI Responses)"
	noteDiscovery = "kvroute routes to the endpoints it is given (kvroute-epp: the InferencePool's pods or --endpoints) and subscribes to their KV events itself"
	noteMetrics   = "kvroute does not scrape engine metrics; " + noteLoad
)

// catalog holds the llm-d router's plugin types that kvroute does not
// translate, by type name. A type not listed is an llm-d or third-party
// plugin kvroute has no equivalent for.
var catalog = map[string]verdict{
	// Pickers and profile handlers.
	"max-score-picker":              {NotNeeded, "kvroute's pick stage always takes the highest total score, ties broken by a hash of the request's first new block and the endpoint, the same on every replica"},
	"random-picker":                 {NoEquivalent, "kvroute always picks the highest total score"},
	"weighted-random-picker":        {NoEquivalent, "kvroute always picks the highest total score"},
	"single-profile-handler":        {NotNeeded, "kvroute picks once, in one role, among every candidate, unless a host passes a kvroute.Profile"},
	"pd-profile-handler":            {NoEquivalent, notePD},
	"disagg-profile-handler":        {NoEquivalent, notePD},
	"data-parallel-profile-handler": {Different, "kvroute routes to each data-parallel rank as an endpoint of its own"},
	"header-profile-handler":        {NoEquivalent, notePD},
	"prefix-based-pd-decider":       {NoEquivalent, notePD},
	"always-disagg-pd-decider":      {NoEquivalent, notePD},
	"prefill-header-handler":        {NoEquivalent, notePD},
	"disagg-headers-handler":        {NoEquivalent, notePD},
	"prefill-filter":                {NoEquivalent, notePD},
	"decode-filter":                 {Different, "kvroute has no role filter: without a prefill/decode profile every endpoint it is given is a candidate, so give kvroute-epp the decode endpoints only"},
	"encode-filter":                 {NoEquivalent, notePD},

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

	// Affinity kvroute does not have yet.
	"session-affinity-scorer": {NoEquivalent, noteSession},
	"session-affinity-filter": {NoEquivalent, noteSession},
	"session-id-producer":     {NoEquivalent, noteSession},
	"lora-affinity-scorer":    {NoEquivalent, "not yet in kvroute: LoRA affinity (kvroute keys a LoRA request's blocks under the adapter's name, so the cache-aware routing already follows the adapter)"},

	// Admission and flow control.
	"utilization-detector":           {NoEquivalent, noteAdmission},
	"concurrency-detector":           {NoEquivalent, noteAdmission},
	"latency-slo-admitter":           {NoEquivalent, noteAdmission},
	"probabilistic-admitter":         {NoEquivalent, noteAdmission},
	"fcfs-ordering-policy":           {NoEquivalent, noteAdmission},
	"edf-ordering-policy":            {NoEquivalent, noteAdmission},
	"global-strict-fairness-policy":  {NoEquivalent, noteAdmission},
	"round-robin-fairness-policy":    {NoEquivalent, noteAdmission},
	"static-usage-limit-policy":      {NoEquivalent, noteAdmission},
	"slo-deadline-ordering-policy":   {NoEquivalent, noteAdmission},
	"priority-holdback-policy":       {NoEquivalent, noteAdmission},
	"soft-reflective-ceiling-policy": {NoEquivalent, noteAdmission},

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
	"header-based-testing-filter":          {NoEquivalent, "not yet in kvroute: the Inference Extension's conformance hooks"},
	"destination-endpoint-served-verifier": {NoEquivalent, "not yet in kvroute: the Inference Extension's conformance hooks"},
}

// Notes of the EndpointPickerConfig's own keys and of the scheduling
// profiles (used by picker.go).
const (
	noteGates      = "kvroute has no feature gates: what it implements is always on, and what it does not is reported on its own key"
	noteProfiles   = "kvroute runs one scheduling profile, the first, unless a host passes a kvroute.Profile; " + notePD
	noteNoFilter   = "kvroute's prefix-cache affinity filter always runs before its scorers, with affinity.* (kvroute's defaults unless a prefix-cache-affinity-filter plugin sets them)"
	noteNoScorer   = "kvroute's token-load scorer always scores, weighted by loadWeight (default 1)"
	notePrefixSc   = "kvroute scores no prefix: its prefix-cache affinity filter keeps the cache-warm endpoints and the token-load scorer discounts each endpoint's cached prefix, so this weight has no counterpart"
	noteWeightOnly = "weights apply to scorers; kvroute's affinity filter has none"
	noteNoProducer = "no precise-prefix-cache-producer: kvroute keeps its precise index from the engines' KV events anyway, with kvroute's defaults (blockSize 64, events on port 5556, replay on 5559)"
	noteCrowding   = "kvroute's filter also has a crowding rule, which llm-d's has not: a request leaves warm endpoints crowded with open requests for one where it re-prefills little more (affinity.crowdingRatio, default 1.5; 0 turns it off in a kvroute configuration)"
	noteZeroWeight = "a zero weight mutes the scorer in llm-d; kvroute's token-load scorer always scores, and loadWeight 0 means its default, 1"
)
