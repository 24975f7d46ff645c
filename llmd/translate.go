package llmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/internal/yamldoc"
)

// Options tune Load.
type Options struct {
	// Strict makes every Finding an error: Load then fails, listing them
	// all, unless the document is translated whole. The default returns
	// the findings beside the Config, for the caller to log.
	Strict bool
}

// Translate is Load in strict mode, without the findings: it returns the
// Config of a document that translates whole and an error listing every
// llm-d setting kvroute does not carry over otherwise.
func Translate(r io.Reader) (kvroute.Config, error) {
	cfg, _, err := Load(r, Options{Strict: true})
	return cfg, err
}

// Load reads a configuration document, YAML or JSON, and returns the
// kvroute.Config it makes and the Findings: the llm-d settings of the
// document kvroute does not carry over, each with its path and how kvroute
// stands to it (an EndpointPickerConfig's in the order of its plugins, then
// its scheduling profiles, then its other keys). The document is either
//
//   - an llm-d EndpointPickerConfig, whole (apiVersion, kind, plugins,
//     schedulingProfiles and the rest of its top-level keys): the plugins
//     kvroute implements and their parameters are translated, the token-load
//     scorer's weight in the scheduling profile is loadWeight, and every
//     other plugin, parameter and key is a Finding; or
//   - a kvroute configuration (kvroute.LoadConfig's keys) that may carry,
//     at its top level, the parameters blocks of the llm-d plugins kvroute
//     implements under their plugin type names (see the package doc).
//
// Either way absent settings keep kvroute.DefaultConfig's values and the
// result is validated. Keys that are neither kvroute's nor llm-d's are
// errors naming their path (as in kvroute.LoadConfig: durations are Go
// duration strings, a key given twice is an error), as is a setting given
// by two keys, even with equal values. With Options.Strict, findings are
// an error too. Every error wraps kvroute.ErrInvalidConfig.
func Load(r io.Reader, opts Options) (kvroute.Config, []Finding, error) {
	res, err := load(r, opts, false)
	return res.Config, res.Findings, err
}

// load is LoadResult or, without withStages, Load: the stages are then
// findings.
func load(r io.Reader, opts Options, withStages bool) (Result, error) {
	data, err := io.ReadAll(io.LimitReader(r, jsonconf.MaxBytes+1))
	if err != nil {
		return Result{}, invalid(err)
	}
	if len(data) > jsonconf.MaxBytes {
		return Result{}, invalid(&jsonconf.Error{Msg: fmt.Sprintf("configuration larger than %d bytes", jsonconf.MaxBytes)})
	}
	if !isJSON(data) {
		// YAML, or broken JSON: a document that starts as JSON and is not
		// YAML either gets the JSON reader's error. A stream of more than
		// one YAML document is refused, not read as its first.
		js, err := yamldoc.ToJSON(data)
		switch {
		case err == nil:
			data = js
		case errors.Is(err, yamldoc.ErrSeveralDocuments):
			return Result{}, invalid(fmt.Errorf("the configuration %w", err))
		case !startsAsJSON(data):
			return Result{}, invalid(fmt.Errorf("yaml: %w", err))
		}
	}
	var cfg kvroute.Config
	var findings []Finding
	var st stages
	if isPickerConfig(data) {
		cfg, findings, err = loadPicker(data, &st)
	} else {
		cfg, findings, err = loadBlocks(data)
	}
	if err != nil {
		return Result{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if err := st.validate(); err != nil {
		return Result{}, err
	}
	if !withStages {
		findings = append(findings, st.dropped()...)
		st = stages{}
	}
	if opts.Strict && len(findings) > 0 {
		return Result{Findings: findings}, fmt.Errorf("%w: strict: %d llm-d settings are not carried over:%s", kvroute.ErrInvalidConfig, len(findings), list(findings))
	}
	return Result{Config: cfg, Disagg: st.disagg, Session: st.session, Admission: st.admission, LoRA: st.lora, Findings: findings}, nil
}

// isJSON reports whether data is read as JSON rather than YAML: it is
// valid JSON, or starts with a whole JSON value followed by something else,
// which jsonconf then reports (YAML would drop the rest silently).
func isJSON(data []byte) bool {
	if json.Valid(data) {
		return true
	}
	var v json.RawMessage
	return json.NewDecoder(bytes.NewReader(data)).Decode(&v) == nil
}

// startsAsJSON reports whether data's first non-space byte opens a JSON
// object or list.
func startsAsJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// list formats findings one per line, each indented under the error.
func list(findings []Finding) string {
	var b strings.Builder
	for _, f := range findings {
		b.WriteString("\n\t" + f.String())
	}
	return b.String()
}

// loadBlocks reads a kvroute configuration document that may carry llm-d
// plugin parameters blocks at its top level.
func loadBlocks(data []byte) (kvroute.Config, []Finding, error) {
	// The whole document first, so that its first error is the one
	// reported, in document order, whichever part it is in.
	if err := jsonconf.Check(data, documentType); err != nil {
		return kvroute.Config{}, nil, invalid(stageBlock(err))
	}
	blocks, rest, err := split(data)
	if err != nil {
		return kvroute.Config{}, nil, invalid(err)
	}
	cfg := kvroute.DefaultConfig()
	if err := jsonconf.Unmarshal(rest, &cfg); err != nil {
		return kvroute.Config{}, nil, invalid(err)
	}
	if blocks == nil {
		return cfg, nil, nil
	}
	var ps plugins
	if err := jsonconf.Unmarshal(blocks, &ps); err != nil {
		return kvroute.Config{}, nil, invalid(err)
	}
	var top map[string]any
	if err := json.Unmarshal(rest, &top); err != nil {
		return kvroute.Config{}, nil, invalid(err)
	}
	findings, err := ps.apply(&cfg, top, source{})
	if err != nil {
		return kvroute.Config{}, nil, err
	}
	return cfg, findings, nil
}

// stageBlock returns err, jsonconf.Check's error, or when it is a
// top-level key naming an llm-d plugin of a stage beside the router, an
// error saying where that stage is configured: a kvroute configuration
// carries the parameters of the plugins that set the router's own keys
// only, as it has no scheduling profiles to give a scorer its weight or a
// profile handler its decider.
func stageBlock(err error) error {
	var je *jsonconf.Error
	if !errors.As(err, &je) || !strings.HasPrefix(je.Msg, "unknown key") {
		return err
	}
	flag := stageFlags[je.Path]
	if flag == "" {
		return err
	}
	return &jsonconf.Error{Path: je.Path, Msg: "llm-d's " + je.Path + " configures a stage beside the router, which a kvroute configuration does not carry: " +
		"give it in an llm-d EndpointPickerConfig (plugins and schedulingProfiles) or configure the stage with kvroute-epp " + flag}
}

// invalid wraps err in kvroute.ErrInvalidConfig unless it already is one.
func invalid(err error) error {
	if errors.Is(err, kvroute.ErrInvalidConfig) {
		return err
	}
	return fmt.Errorf("%w: %w", kvroute.ErrInvalidConfig, err)
}

// documentType is the shape of a document Translate reads: kvroute.Config's
// fields and the plugin blocks side by side, for jsonconf.Check.
var documentType = func() reflect.Type {
	var fields []reflect.StructField
	for _, t := range []reflect.Type{reflect.TypeFor[kvroute.Config](), reflect.TypeFor[plugins]()} {
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
			}
		}
	}
	return reflect.StructOf(fields)
}()

// blockKeys are the top-level keys of plugins.
var blockKeys = map[string]bool{pp: true, af: true, tl: true, tp: true, il: true}

// split takes the plugin blocks out of a document that jsonconf.Check
// accepted: it returns them as one JSON object (nil when there are none)
// and the rest, kvroute's part, with its members in their order. A
// document that is not an object (null) is all rest.
func split(data []byte) (blocks, rest []byte, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, data, nil
	}
	var b, r bytes.Buffer
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, _ := tok.(string) // an object's member starts with its key
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		out := &r
		if _, ok := blockKeys[key]; ok {
			out = &b
		}
		if out.Len() > 0 {
			out.WriteByte(',')
		} else {
			out.WriteByte('{')
		}
		k, _ := json.Marshal(key) // a string always encodes
		out.Write(k)
		out.WriteByte(':')
		out.Write(v)
	}
	for _, out := range []*bytes.Buffer{&b, &r} {
		if out.Len() == 0 {
			out.WriteByte('{')
		}
		out.WriteByte('}')
	}
	if b.Len() == 2 {
		return nil, r.Bytes(), nil
	}
	return b.Bytes(), r.Bytes(), nil
}
