package llmd

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/jsonconf"
)

// The llm-d plugin types of prefill/decode disaggregation kvroute
// translates into a disagg.Config.
const (
	pdHandler       = "disagg-profile-handler"
	pdHandlerLegacy = "pd-profile-handler"
	pdPrefixDecider = "prefix-based-pd-decider"
	pdAlwaysDecider = "always-disagg-pd-decider"
	prefillFilter   = "prefill-filter"
	decodeFilter    = "decode-filter"
)

// stagePlugin is a plugin of a stage kvroute runs beside the router (P/D,
// session affinity, LoRA affinity), kept until every plugin is known: a profile handler
// may name a decider listed after it.
type stagePlugin struct {
	name, typ, path string
	params          json.RawMessage
}

// stageFlags are the llm-d plugin types an EndpointPickerConfig translates
// into a stage beside the router (translatePD, translateSession,
// translateLoRA) rather than reporting them from the catalog, each with
// the kvroute-epp flag that configures its stage from a file of its own.
var stageFlags = map[string]string{
	pdHandler: "--disagg-config", pdHandlerLegacy: "--disagg-config", pdPrefixDecider: "--disagg-config",
	pdAlwaysDecider: "--disagg-config", prefillFilter: "--disagg-config", decodeFilter: "--disagg-config",
	sessionScorer: "--session-config", sessionFilter: "--session-config", sessionIDProducer: "--session-config",
	loraScorer: "--lora-config",
}

// isStageType reports whether plugins of type typ are translated into a
// stage.
func isStageType(typ string) bool { return stageFlags[typ] != "" }

// pdHandlerParams are the parameters of llm-d's disagg-profile-handler, in
// its nested form and its deprecated flat one, and of the deprecated
// pd-profile-handler, which llm-d reads into the same handler.
type pdHandlerParams struct {
	// StageOrder "decode-first" (or empty) is kvroute's order;
	// "prefill-first", without a prefill decider, prefills every request
	// (prefillFirst reads it).
	StageOrder string `json:"stageOrder"`
	// Profiles name the scheduling profiles of each stage.
	Profiles struct {
		Decode  string `json:"decode"`
		Prefill string `json:"prefill"`
		Encode  string `json:"encode"`
	} `json:"profiles"`
	// Deciders name the decider plugins; deciders.prefill turns P/D on.
	Deciders struct {
		Prefill string `json:"prefill"`
		Encode  string `json:"encode"`
	} `json:"deciders"`
	// The deprecated flat names of the same settings.
	DecodeProfile            string `json:"decodeProfile"`
	PrefillProfile           string `json:"prefillProfile"`
	EncodeProfile            string `json:"encodeProfile"`
	PrefillDeciderPluginName string `json:"prefillDeciderPluginName"`
	EncodeDeciderPluginName  string `json:"encodeDeciderPluginName"`
	DeciderPluginName        string `json:"deciderPluginName"`
	// pd-profile-handler's settings that llm-d no longer reads.
	PrefixPluginType            json.RawMessage `json:"prefixPluginType" finding:"unneeded:llm-d's handler never read it"`
	PrefixPluginName            json.RawMessage `json:"prefixPluginName" finding:"unneeded:llm-d's handler never read it"`
	PrimaryPort                 json.RawMessage `json:"primaryPort" finding:"unneeded:kvroute names the prefill endpoint in x-prefiller-host-port and routes to the decode endpoint's own port"`
	PrefixMatchInfoProducerName json.RawMessage `json:"prefixMatchInfoProducerName" finding:"unneeded:kvroute's decider always reads its own precise index"`
}

// prefixDeciderParams are the parameters of llm-d's prefix-based-pd-decider.
type prefixDeciderParams struct {
	// NonCachedTokens is disagg's nonCachedTokens; 0 turns llm-d's decider
	// off (kvroute then configures no P/D), and a negative one is an error,
	// as in llm-d (validate).
	NonCachedTokens int64 `json:"nonCachedTokens"`
	// PromptTokens is llm-d's minimum prompt length for P/D.
	PromptTokens json.RawMessage `json:"promptTokens" finding:"none:kvroute's decider compares only the uncached prompt tokens on the decode endpoint with nonCachedTokens; it has no minimum prompt length"`
}

// validate refuses the negative thresholds llm-d's decider refuses (a
// negative nonCachedTokens would be kvroute's "split every request");
// path is the parameters' path.
func (dp prefixDeciderParams) validate(path string) error {
	var prompt int64
	if present(dp.PromptTokens) {
		if err := decodeStrict(dp.PromptTokens, &prompt, join(path, "promptTokens")); err != nil {
			return err
		}
	}
	for _, v := range []struct {
		key string
		n   int64
	}{{"nonCachedTokens", dp.NonCachedTokens}, {"promptTokens", prompt}} {
		if v.n < 0 {
			return invalid(fmt.Errorf("%s: %d is negative, which llm-d's decider refuses", join(path, v.key), v.n))
		}
	}
	return nil
}

// Notes of the P/D translation.
const (
	notePD         = "kvroute's prefill/decode disaggregation is package disagg (kvroute-epp --disagg-config, roles from the pods' llm-d.ai/role label, --role-label): an EndpointPickerConfig turns it on with a disagg-profile-handler (or pd-profile-handler) whose prefill decider is a prefix-based-pd-decider or an always-disagg-pd-decider"
	notePDProfile  = "kvroute's P/D profile picks the decode endpoint by its own decode score (disagg's decodeCacheWeight and decodeLoadWeight over the cached share of the prompt and the free decode capacity) and the prefill endpoint with the router's filter and scorers (weighted as in the prefill profile), so this profile's plugins and weights have no counterpart"
	noteRoleFilter = "kvroute's P/D profile decodes on endpoints whose llm-d.ai/role is decode or both and prefills on prefill or both, as llm-d's role filters; it reads prefill-decode and encode-prefill-decode as both and encode-prefill as prefill, as those filters do, leaves encode workers out of the endpoint set, and reads an unlabelled pod as both, so such a pod may also prefill, which llm-d's prefill-filter refuses"
	noteHeaders    = "kvroute names the prefill endpoint in x-prefiller-host-port itself whenever its P/D profile splits a request"
	noteEncode     = "kvroute has no encode stage: it disaggregates prefill and decode only"
)

// translatePD turns the P/D plugins of staged into st.disagg: a profile
// handler with a prefill decider kvroute implements, or in prefill-first
// order with none, and a scheduling profile (of schedProfiles) named as
// its prefill profile, without which llm-d's handler never prefills
// elsewhere. It returns the names
// of the handler's prefill and decode scheduling profiles (nil without
// P/D) and its findings.
func translatePD(staged []stagePlugin, typeOf map[string]string, schedProfiles []schedulingProfile, st *stages) ([]string, []Finding, error) {
	var out []Finding
	var handler *stagePlugin
	deciders := map[string]stagePlugin{}
	for i, p := range staged {
		switch p.typ {
		case pdHandler, pdHandlerLegacy:
			if handler != nil {
				return nil, nil, invalid(fmt.Errorf("%s and %s are both profile handlers: llm-d runs one", handler.path, p.path))
			}
			handler = &staged[i]
		case pdPrefixDecider, pdAlwaysDecider:
			deciders[p.name] = p
		}
	}
	used := ""
	var profiles []string
	if handler != nil {
		var hp pdHandlerParams
		if err := decodeStrict(handler.params, &hp, handler.path+".parameters"); err != nil {
			return nil, nil, err
		}
		at := handler.path + ".parameters"
		out = append(out, untranslated(&hp, at)...)
		st.decodeProfile = cmp.Or(hp.Profiles.Decode, hp.DecodeProfile, "decode")
		decider := cmp.Or(hp.Deciders.Prefill, hp.PrefillDeciderPluginName, hp.DeciderPluginName)
		if decider == "" && handler.typ == pdHandlerLegacy {
			decider = pdPrefixDecider // pd-profile-handler's default
		}
		prefillFirst, err := prefillFirst(hp.StageOrder, join(at, "stageOrder"))
		if err != nil {
			return nil, nil, err
		}
		if prefillFirst && decider != "" {
			return nil, nil, invalid(fmt.Errorf("%s: prefill-first takes no prefill decider (llm-d's handler refuses %q)", join(at, "stageOrder"), decider))
		}
		if e := cmp.Or(hp.Deciders.Encode, hp.EncodeDeciderPluginName, hp.Profiles.Encode, hp.EncodeProfile); e != "" {
			out = append(out, Finding{Path: at, Kind: NoEquivalent, Note: noteEncode})
		}
		prefill := cmp.Or(hp.Profiles.Prefill, hp.PrefillProfile, "prefill")
		hasPrefill := slices.ContainsFunc(schedProfiles, func(p schedulingProfile) bool { return p.Name == prefill })
		switch t, ok := typeOf[decider]; {
		case prefillFirst && hasPrefill:
			// llm-d prefills every request on the prefill profile's pick,
			// then decodes: kvroute's always-disagg.
			st.disagg, st.disaggAt = &disagg.Config{NonCachedTokens: -1}, handler.path
			profiles = []string{prefill, st.decodeProfile}
			out = append(out, Finding{Path: join(at, "stageOrder"), Kind: Different, Note: "llm-d's prefill-first handler prefills every request on the prefill profile's pick before it picks the decode endpoint; kvroute splits every request with a prompt too, picking the decode endpoint first"})
		case decider == "" || !hasPrefill && ok:
			note := "without a prefill decider llm-d's handler runs the decode profile alone; kvroute picks in one role without a P/D profile"
			if decider != "" {
				note = fmt.Sprintf("no scheduling profile is named %q, the handler's prefill profile, so llm-d's handler never prefills on another endpoint; kvroute picks in one role without a P/D profile", prefill)
			}
			out = append(out, Finding{Path: handler.path, Kind: NotNeeded, Note: note})
		case !ok:
			return nil, nil, invalid(fmt.Errorf("%s: prefill decider %q: no plugin of that name", at, decider))
		case t != pdPrefixDecider && t != pdAlwaysDecider:
			out = append(out, Finding{Path: handler.path, Kind: NoEquivalent, Note: fmt.Sprintf("its prefill decider %q is a %s; kvroute decides P/D by the uncached prompt tokens on the decode endpoint (prefix-based-pd-decider) or always (always-disagg-pd-decider), so it configures no P/D here", decider, t)})
		default:
			used = decider
			d := deciders[decider]
			cfg := disagg.Config{NonCachedTokens: -1} // always-disagg: every request with a prompt
			if t == pdPrefixDecider {
				var dp prefixDeciderParams
				if err := decodeStrict(d.params, &dp, d.path+".parameters"); err != nil {
					return nil, nil, err
				}
				if err := dp.validate(d.path + ".parameters"); err != nil {
					return nil, nil, err
				}
				out = append(out, untranslated(&dp, d.path+".parameters")...)
				cfg.NonCachedTokens = dp.NonCachedTokens
				if dp.NonCachedTokens == 0 {
					out = append(out, Finding{Path: d.path + ".parameters.nonCachedTokens", Kind: Different,
						Note: "nonCachedTokens 0 (llm-d's default) turns llm-d's decider off, so every request is prefilled where it decodes: kvroute configures no P/D profile (its own nonCachedTokens 0 means 1000)"})
					break
				}
			} else if err := decodeStrict(d.params, &struct{}{}, d.path+".parameters"); err != nil {
				return nil, nil, err // always-disagg-pd-decider takes no parameters
			}
			st.disagg, st.disaggAt = &cfg, handler.path
			profiles = []string{prefill, st.decodeProfile}
		}
	}
	for _, p := range staged {
		switch p.typ {
		case pdPrefixDecider, pdAlwaysDecider:
			if p.name == used {
				break
			}
			// llm-d builds every plugin it lists, run or not, and refuses
			// bad parameters at start: so does the translation.
			if p.typ == pdPrefixDecider {
				var dp prefixDeciderParams
				if err := decodeStrict(p.params, &dp, p.path+".parameters"); err != nil {
					return nil, nil, err
				}
				if err := dp.validate(p.path + ".parameters"); err != nil {
					return nil, nil, err
				}
			} else if err := decodeStrict(p.params, &struct{}{}, p.path+".parameters"); err != nil {
				return nil, nil, err
			}
			out = append(out, Finding{Path: p.path, Kind: NotNeeded, Note: "no profile handler runs it as its prefill decider; " + notePD})
		case prefillFilter, decodeFilter:
			if err := decodeStrict(p.params, &struct{}{}, p.path+".parameters"); err != nil {
				return nil, nil, err // llm-d's role filters take no parameters
			}
			switch {
			case st.disagg != nil:
				out = append(out, Finding{Path: p.path, Kind: NotNeeded, Note: noteRoleFilter})
			case p.typ == decodeFilter:
				out = append(out, Finding{Path: p.path, Kind: Different, Note: "without a P/D profile kvroute has no role filter: every endpoint it is given is a candidate, so give kvroute-epp the decode endpoints only, or turn P/D on (" + notePD + ")"})
			default:
				out = append(out, Finding{Path: p.path, Kind: NoEquivalent, Note: notePD})
			}
		}
	}
	return profiles, out, nil
}

// prefillFirst reads a disagg-profile-handler's stageOrder as llm-d does,
// in any case and with or without its hyphen or an underscore: whether it
// is prefill-first, and an error for an order llm-d has not; path is its
// path.
func prefillFirst(order, path string) (bool, error) {
	switch strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(order)) {
	case "", "decodefirst", "decode":
		return false, nil
	case "prefillfirst", "prefill":
		return true, nil
	}
	return false, invalid(fmt.Errorf("%s: %q is neither decode-first nor prefill-first", path, order))
}

// decodeStrict decodes a plugin's parameters (raw, possibly absent) into v
// by jsonconf's rules, errors naming their full path.
func decodeStrict[T any](raw json.RawMessage, v *T, path string) error {
	if !present(raw) {
		return nil
	}
	if err := jsonconf.Unmarshal(raw, v); err != nil {
		var je *jsonconf.Error
		if errors.As(err, &je) {
			p := path
			if je.Path != "" {
				p = join(path, je.Path)
			}
			return invalid(&jsonconf.Error{Path: p, Msg: je.Msg})
		}
		return invalid(fmt.Errorf("%s: %w", path, err))
	}
	return nil
}

// prefillWeight returns, under P/D (pdProfiles the prefill and decode
// profiles' names), a Finding when the prefill profile weighs the scorer
// named name otherwise than the decode profile, whose weight kvroute takes
// (an absent weight is llm-d's default, 1); kvroute is how kvroute uses
// that weight.
func prefillWeight(name string, profiles []schedulingProfile, pdProfiles []string, kvroute string) (Finding, bool) {
	if len(pdProfiles) != 2 {
		return Finding{}, false
	}
	var w [2]*float64
	var found [2]bool
	for _, prof := range profiles {
		for i, pn := range pdProfiles {
			if r := profileRef(name, prof); prof.Name == pn && r != nil && !found[i] {
				w[i], found[i] = cmp.Or(r.Weight, &llmdDefaultWeight), true
			}
		}
	}
	if !found[0] || !found[1] || *w[0] == *w[1] {
		return Finding{}, false
	}
	return Finding{Path: "schedulingProfiles[" + pdProfiles[0] + "].plugins[" + name + "].weight", Kind: Different,
		Note: fmt.Sprintf("llm-d weighs it %v in the prefill profile %q and %v in the decode profile %q; %s %v, the decode profile's", *w[0], pdProfiles[0], *w[1], pdProfiles[1], kvroute, *w[1])}, true
}

// llmdDefaultWeight is a scorer's weight in llm-d when its profile gives
// none.
var llmdDefaultWeight = 1.0

// isPDProfile reports whether the scheduling profile name is one of the P/D
// handler's.
func isPDProfile(profiles []string, name string) bool { return slices.Contains(profiles, name) }
