package llmd

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/jsonconf"
)

// pickerConfig is an llm-d EndpointPickerConfig document: the top-level
// keys of llm-d's config API (apix/config/v1alpha1), as kvroute reads them.
type pickerConfig struct {
	APIVersion         string              `json:"apiVersion"`
	Kind               string              `json:"kind"`
	FeatureGates       []string            `json:"featureGates"`
	Plugins            []pluginSpec        `json:"plugins"`
	SchedulingProfiles []schedulingProfile `json:"schedulingProfiles"`
	SaturationDetector json.RawMessage     `json:"saturationDetector" finding:"different:kvroute's admission judges saturation by its own accounting (--admission-config saturation.maxPrefillBacklog, saturation.maxOpenRequests) and, with --engine-metrics-config, the engines' vLLM metrics"`
	DataLayer          json.RawMessage     `json:"dataLayer" finding:"unneeded:kvroute gathers its own data: KV events from the endpoints it routes to and load from its own accounting (the source plugins are reported under plugins)"`
	// FlowControl is translated with the flowControl feature gate
	// (translateAdmission).
	FlowControl json.RawMessage `json:"flowControl"`
	Parser      json.RawMessage `json:"parser" finding:"different:kvroute reads the request body itself, by the request path"`
	// RequestHandler holds llm-d's parsers (requestHandler.parsers), the
	// successor of parser.
	RequestHandler json.RawMessage `json:"requestHandler" finding:"different:kvroute reads the request body itself, by the request path"`
}

// pluginSpec is one entry of plugins: a plugin instance.
type pluginSpec struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters"`
}

// schedulingProfile is one entry of schedulingProfiles.
type schedulingProfile struct {
	Name            string          `json:"name"`
	Plugins         []profilePlugin `json:"plugins"`
	FallbackProfile json.RawMessage `json:"fallbackProfile" finding:"none:kvroute falls back to load alone by itself when no endpoint holds a cached prefix"`
}

// profilePlugin is a plugin reference of a scheduling profile.
type profilePlugin struct {
	PluginRef string   `json:"pluginRef"`
	Weight    *float64 `json:"weight"`
}

// The EndpointPickerConfig's kind and the API versions llm-d reads it in
// (the Inference Extension's group, and llm-d's own since llm-d-router).
const pickerKind = "EndpointPickerConfig"

var pickerAPIVersions = []string{"inference.networking.x-k8s.io/v1alpha1", "llm-d.ai/v1alpha1"}

// isPickerConfig reports whether the JSON document data is an
// EndpointPickerConfig: an object with one of its identifying keys.
func isPickerConfig(data []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return false
	}
	for _, k := range []string{"apiVersion", "kind", "plugins", "schedulingProfiles"} {
		if _, ok := top[k]; ok {
			return true
		}
	}
	return false
}

// loadPicker translates an EndpointPickerConfig document onto
// kvroute.DefaultConfig, and its P/D, session affinity, LoRA affinity and
// flow control into st.
func loadPicker(data []byte, st *stages) (kvroute.Config, []Finding, error) {
	var pc pickerConfig
	if err := jsonconf.Unmarshal(data, &pc); err != nil {
		return kvroute.Config{}, nil, invalid(err)
	}
	bad := func(format string, args ...any) (kvroute.Config, []Finding, error) {
		return kvroute.Config{}, nil, fmt.Errorf("%w: %s", kvroute.ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if pc.Kind != pickerKind {
		return bad("kind %q: kvroute reads an llm-d %s here", pc.Kind, pickerKind)
	}
	if !slices.Contains(pickerAPIVersions, pc.APIVersion) {
		return bad("apiVersion %q: kvroute reads an %s of %s", pc.APIVersion, pickerKind, strings.Join(pickerAPIVersions, " or "))
	}
	var (
		ps       plugins
		src      = source{path: map[string]string{}}
		findings []Finding
		typeOf   = map[string]string{} // plugin name → type
		kindOf   = map[string]string{} // translated kind (pp, af, ...) → plugin name
		deferred string                // a precise-prefix-cache-scorer beside a producer
		staged   []stagePlugin         // P/D, session and LoRA plugins, translated once all are known
	)
	for i, p := range pc.Plugins {
		if p.Type == "" {
			return bad("plugins[%d].type: missing", i)
		}
		name := p.Name
		if name == "" {
			name = p.Type
		}
		if _, dup := typeOf[name]; dup {
			return bad("plugins[%d]: a second plugin named %q", i, name)
		}
		typeOf[name] = p.Type
		path := "plugins[" + name + "]"
		k := translatedKind(p.Type)
		if k == "" && isStageType(p.Type) {
			staged = append(staged, stagePlugin{name: name, typ: p.Type, path: path, params: p.Parameters})
			continue
		}
		if k == "" {
			v, ok := catalog[p.Type]
			if !ok {
				v = verdict{NoEquivalent, "kvroute has no plugin of type " + p.Type}
			}
			findings = append(findings, Finding{Path: path, Kind: v.kind, Note: v.note})
			continue
		}
		var one plugins
		if err := decodeParams(&one, k, p.Parameters, path+".parameters"); err != nil {
			return kvroute.Config{}, nil, err
		}
		if other, dup := kindOf[k]; dup {
			if k != pp || typeOf[other] == p.Type || deferred != "" {
				return bad("%s and plugins[%s] are both %s plugins: kvroute has one", path, other, k)
			}
			// llm-d's deprecated scorer beside a producer: kvroute's one
			// index takes the producer's parameters, whichever comes first.
			scorer, producer := name, other
			if p.Type == pp {
				scorer, producer = other, name
			}
			deferred = scorer
			findings = append(findings, Finding{Path: "plugins[" + scorer + "]", Kind: Different,
				Note: fmt.Sprintf("llm-d's deprecated scorer scores from the precise-prefix-cache-producer's index, or from an index of its own when created before it; kvroute keeps one precise index, configured by plugins[%s]", producer)})
			if p.Type != pp {
				continue
			}
		}
		kindOf[k] = name
		src.path[k] = path + ".parameters"
		one.into(&ps, k)
	}
	findings = append(findings, wiring(ps, src, typeOf)...)
	if len(pc.SchedulingProfiles) == 0 {
		// llm-d's default: one profile of every listed plugin.
		def := schedulingProfile{Name: "default"}
		for _, p := range pc.Plugins {
			def.Plugins = append(def.Plugins, profilePlugin{PluginRef: cmp.Or(p.Name, p.Type)})
		}
		pc.SchedulingProfiles = []schedulingProfile{def}
	}
	pdProfiles, more, err := translatePD(staged, typeOf, pc.SchedulingProfiles, st)
	if err != nil {
		return kvroute.Config{}, nil, err
	}
	findings = append(findings, more...)
	// llm-d's P/D handler runs its profiles by name, whatever their order:
	// the decode profile makes the request's own pick and, under P/D, the
	// prefill profile the prefill pick, which kvroute's router scorers
	// make. Without a handler kvroute reads the first profile.
	router, decode := 0, 0
	if i := profileIndex(pc.SchedulingProfiles, st.decodeProfile); i >= 0 {
		router, decode = i, i
	}
	if len(pdProfiles) == 2 {
		if i := profileIndex(pc.SchedulingProfiles, pdProfiles[0]); i >= 0 {
			router = i
		}
	}
	weights := pc.SchedulingProfiles[decode] // the session and LoRA scorers' weights
	if more, err = translateSession(staged, pc.SchedulingProfiles, weights, pdProfiles, st); err != nil {
		return kvroute.Config{}, nil, err
	}
	findings = append(findings, more...)
	if more, err = translateLoRA(staged, pc.SchedulingProfiles, weights, pdProfiles, st); err != nil {
		return kvroute.Config{}, nil, err
	}
	findings = append(findings, more...)
	for i, prof := range pc.SchedulingProfiles {
		path := "schedulingProfiles[" + prof.Name + "]"
		for j, ref := range prof.Plugins {
			if _, ok := typeOf[ref.PluginRef]; !ok {
				return bad("%s.plugins[%d].pluginRef %q: no plugin of that name", path, j, ref.PluginRef)
			}
		}
		findings = append(findings, untranslated(&prof, path)...)
		if i != router {
			if isPDProfile(pdProfiles, prof.Name) {
				findings = append(findings, Finding{Path: path, Kind: Different, Note: notePDProfile})
			} else {
				findings = append(findings, Finding{Path: path, Kind: NoEquivalent, Note: noteProfiles})
			}
			continue
		}
		findings = append(findings, profileFindings(prof, path, typeOf, &src)...)
	}
	gate := false
	for _, g := range pc.FeatureGates {
		// llm-d reads a gate as name or name=value, value a boolean; the
		// last entry naming a gate wins.
		name, val, valued := strings.Cut(g, "=")
		on := true
		if valued {
			var err error
			if on, err = strconv.ParseBool(strings.ToLower(strings.TrimSpace(val))); err != nil {
				return bad("featureGates[%s]: %q is not a boolean, which llm-d's picker refuses", g, val)
			}
		}
		if name == flowControlGate {
			gate = on
			continue
		}
		findings = append(findings, Finding{Path: "featureGates[" + g + "]", Kind: Different, Note: noteGates})
	}
	if more, err = translateAdmission(&pc, gate, st); err != nil {
		return kvroute.Config{}, nil, err
	}
	findings = append(findings, more...)
	findings = append(findings, untranslated(&pc, "")...)
	if ps.PrecisePrefixCacheProducer == nil {
		findings = append(findings, Finding{Path: "plugins", Kind: Different, Note: noteNoProducer})
	} else {
		llmdDefaults(ps.PrecisePrefixCacheProducer)
	}
	cfg := kvroute.DefaultConfig()
	more, err = ps.apply(&cfg, nil, src)
	if err != nil {
		return kvroute.Config{}, nil, err
	}
	findings = append(findings, more...)
	if name, ok := kindOf[af]; ok && *cfg.Affinity.CrowdingRatio > 0 && *cfg.Affinity.AffinityThreshold > 0 {
		findings = append(findings, Finding{Path: "plugins[" + name + "]", Kind: Different, Note: noteCrowding})
	}
	sortFindings(findings, pc.Plugins)
	return cfg, findings, nil
}

// llmd's defaults for the precise producer's settings, where they differ
// from kvroute's: an EndpointPickerConfig that leaves them unset runs
// llm-d's picker with these, so its engines are set up for them.
const (
	llmdBlockSize  = 16   // kvblock's default, vLLM's --block-size default
	llmdSocketPort = 5557 // podDiscoveryConfig.socketPort
)

// llmdDefaults fills in the settings p leaves unset with llm-d's values
// where kvroute's defaults differ: the block size, the engines' events
// port (replay stays off without a replaySocketPort, as in llm-d) and
// speculative indexing, off unless asked for.
func llmdDefaults(p *precisePrefixCacheProducer) {
	if p.TokenProcessorConfig == nil {
		p.TokenProcessorConfig = &tokenProcessorConfig{}
	}
	if t := p.TokenProcessorConfig; t.BlockSizeTokens == 0 && t.BlockSize == 0 {
		t.BlockSizeTokens = llmdBlockSize
	}
	if p.KVEventsConfig == nil {
		p.KVEventsConfig = &kvEventsConfig{}
	}
	if p.KVEventsConfig.PodDiscoveryConfig == nil {
		p.KVEventsConfig.PodDiscoveryConfig = &podDiscoveryConfig{}
	}
	if d := p.KVEventsConfig.PodDiscoveryConfig; d.SocketPort == 0 {
		d.SocketPort = llmdSocketPort
	}
	if p.SpeculativeIndexing == nil {
		off := false
		p.SpeculativeIndexing = &off
	}
}

// profileIndex returns the index of the scheduling profile named name, -1
// when there is none.
func profileIndex(profiles []schedulingProfile, name string) int {
	return slices.IndexFunc(profiles, func(p schedulingProfile) bool { return name != "" && p.Name == name })
}

// translatedKind returns the plugins key of an llm-d plugin type kvroute
// translates, "" for the others.
func translatedKind(typ string) string {
	switch typ {
	case pp, ppScorer:
		return pp
	case tp, tpLegacy:
		return tp
	case af, tl, il:
		return typ
	}
	return ""
}

// decodeParams decodes a plugin's parameters (raw, possibly absent) into
// its block k of ps by jsonconf's rules, errors naming their full path.
func decodeParams(ps *plugins, k string, raw json.RawMessage, path string) error {
	var b bytes.Buffer
	b.WriteString(`{"` + k + `":`)
	if present(raw) {
		b.Write(raw)
	} else {
		b.WriteString("{}")
	}
	b.WriteByte('}')
	var one plugins
	if err := jsonconf.Unmarshal(b.Bytes(), &one); err != nil {
		var je *jsonconf.Error
		if errors.As(err, &je) {
			p := strings.TrimPrefix(je.Path, k)
			return invalid(&jsonconf.Error{Path: path + p, Msg: je.Msg})
		}
		return invalid(fmt.Errorf("%s: %w", path, err))
	}
	one.into(ps, k)
	return nil
}

// into sets block k of ps to one's.
func (one plugins) into(ps *plugins, k string) {
	switch k {
	case pp:
		ps.PrecisePrefixCacheProducer = one.PrecisePrefixCacheProducer
	case af:
		ps.PrefixCacheAffinityFilter = one.PrefixCacheAffinityFilter
	case tl:
		ps.TokenLoadScorer = one.TokenLoadScorer
	case tp:
		ps.TokenProducer = one.TokenProducer
	case il:
		ps.InFlightLoadProducer = one.InFlightLoadProducer
	}
}

// wiring checks the names by which llm-d plugins read each other's data:
// kvroute's filter, scorer and load accounting always read kvroute's own
// precise index and in-flight load, which is what the names mean when they
// name the precise producer and the in-flight load producer.
func wiring(ps plugins, src source, typeOf map[string]string) []Finding {
	var out []Finding
	check := func(path, name string, want ...string) {
		if name == "" || slices.Contains(want, typeOf[name]) {
			return
		}
		what := "names no plugin"
		if t, ok := typeOf[name]; ok {
			what = "is a " + t
		}
		out = append(out, Finding{Path: path, Kind: Different,
			Note: fmt.Sprintf("%q %s; kvroute always reads its own precise index and in-flight load", name, what)})
	}
	if f := ps.PrefixCacheAffinityFilter; f != nil {
		check(src.at(af)+".prefixMatchInfoProducerName", f.PrefixMatchInfoProducerName, pp, ppScorer)
		check(src.at(af)+".inFlightLoadProducerName", f.InFlightLoadProducerName, il)
	}
	if s := ps.TokenLoadScorer; s != nil {
		check(src.at(tl)+".inFlightLoadProducerName", s.InFlightLoadProducerName, il)
	}
	if l := ps.InFlightLoadProducer; l != nil {
		check(src.at(il)+".prefixMatchInfoProducerName", l.PrefixMatchInfoProducerName, pp, ppScorer)
	}
	return out
}

// profileFindings reads the scheduling profile kvroute's router runs (the
// first, or a P/D handler's prefill profile under P/D and its decode
// profile without): the token-load
// scorer's weight becomes loadWeight (through src), weights kvroute has no
// counterpart for are findings, and so is the absence of the filter or the
// scorer kvroute always runs.
func profileFindings(prof schedulingProfile, path string, typeOf map[string]string, src *source) []Finding {
	var out []Finding
	var filter, scorer bool
	for _, ref := range prof.Plugins {
		at := path + ".plugins[" + ref.PluginRef + "]"
		switch typeOf[ref.PluginRef] {
		case tl:
			scorer = true
			switch {
			case ref.Weight != nil && *ref.Weight == 0:
				out = append(out, Finding{Path: at + ".weight", Kind: Different, Note: noteZeroWeight})
			case ref.Weight != nil:
				src.loadWeight, src.weightPath = ref.Weight, at+".weight"
			}
		case af:
			filter = true
			if ref.Weight != nil {
				out = append(out, Finding{Path: at + ".weight", Kind: NotNeeded, Note: noteWeightOnly})
			}
		case ppScorer:
			out = append(out, Finding{Path: at, Kind: Different, Note: notePrefixSc})
		}
	}
	if !filter {
		out = append(out, Finding{Path: path + ".plugins", Kind: Different, Note: noteNoFilter})
	}
	if !scorer {
		out = append(out, Finding{Path: path + ".plugins", Kind: Different, Note: noteNoScorer})
	}
	return out
}

// sortFindings orders findings as the document's parts: plugins in their
// order, then scheduling profiles, then the other top-level keys (the
// sort is stable, so each part keeps its own order).
func sortFindings(fs []Finding, specs []pluginSpec) {
	rank := func(f Finding) int {
		for i, p := range specs {
			name := p.Name
			if name == "" {
				name = p.Type
			}
			if pre := "plugins[" + name + "]"; f.Path == pre || strings.HasPrefix(f.Path, pre+".") {
				return i
			}
		}
		if strings.HasPrefix(f.Path, "schedulingProfiles[") {
			return len(specs)
		}
		return len(specs) + 1
	}
	slices.SortStableFunc(fs, func(a, b Finding) int { return rank(a) - rank(b) })
}
