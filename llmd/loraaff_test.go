package llmd_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
	"github.com/kvroute/kvroute/lora"
)

// loraConfig is an EndpointPickerConfig with llm-d's LoRA affinity scorer
// beside kvroute's filter and scorer, as llm-d's integration tests and the
// scorer's README write it.
const loraConfig = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: precise-prefix-cache-producer
- type: prefix-cache-affinity-filter
- type: token-load-scorer
- type: lora-affinity-scorer
  name: lora-affinity
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-affinity-filter
  - pluginRef: token-load-scorer
  - pluginRef: lora-affinity
    weight: 2
`

// llm-d's lora-affinity-scorer becomes kvroute's LoRA scorer with its
// weight in the profile; how the two rate an engine differs, said in a
// finding; Load, whose caller runs no LoRA scorer, reports it dropped.
func TestPickerConfigLoRA(t *testing.T) {
	res := loadResult(t, loraConfig)
	require.Equal(t, &lora.Config{Weight: 2}, res.LoRA)
	requireFindings(t, res.Findings, crowding, want{"plugins[lora-affinity]", llmd.Different})
	note := res.Findings[1].Note
	for _, s := range []string{"--lora-config", "0.8 where a slot is free", "0.7 where it waits", "maxWaiting", "base model"} {
		require.Contains(t, note, s)
	}

	// No weight: kvroute's default; llm-d's defaults (one profile of every
	// plugin, as in llm-d's default-config.yaml) reference it too.
	res = loadResult(t, strings.Replace(loraConfig, "\n    weight: 2", "", 1))
	require.Equal(t, &lora.Config{}, res.LoRA)
	res = loadResult(t, epc("[{type: prefix-cache-affinity-filter}, {type: token-load-scorer}, {type: lora-affinity-scorer}]", ""))
	require.Equal(t, &lora.Config{}, res.LoRA)

	_, findings, err := llmd.Load(strings.NewReader(loraConfig), llmd.Options{})
	require.NoError(t, err)
	last := findings[len(findings)-1]
	require.Equal(t, llmd.Finding{Path: "plugins[lora-affinity]", Kind: llmd.Different, Note: "kvroute runs the LoRA adapter-affinity scorer (package lora; the gateway's lora block)" +
		" beside the router: llmd.LoadResult returns its configuration (kvroute-epp runs it); llmd.Load does not, so configure it where the host reads it"}, last)
}

// Under P/D the scorer's weight is the decode profile's, else the prefill
// profile's, and a finding says it enters both of kvroute's picks.
func TestPickerConfigLoRABesidePD(t *testing.T) {
	doc := strings.Replace(pdConfig, "- type: max-score-picker\n", "- type: max-score-picker\n- type: lora-affinity-scorer\n", 1)
	res := loadResult(t, doc+"  - pluginRef: lora-affinity-scorer\n    weight: 3\n")
	require.Equal(t, &lora.Config{Weight: 3}, res.LoRA)
	require.NotNil(t, res.Disagg)
	var notes []string
	for _, f := range res.Findings {
		if f.Path == "plugins[lora-affinity-scorer]" {
			require.Equal(t, llmd.Different, f.Kind)
			notes = append(notes, f.Note)
		}
	}
	require.Len(t, notes, 2)
	require.Contains(t, notes[1], "both the prefill pick")

	prefillOnly := strings.Replace(doc, "    weight: 2\n  - pluginRef: max-score-picker\n- name: decode", "    weight: 2\n  - pluginRef: lora-affinity-scorer\n    weight: 5\n  - pluginRef: max-score-picker\n- name: decode", 1)
	require.Equal(t, &lora.Config{Weight: 5}, loadResult(t, prefillOnly).LoRA)
}

// What kvroute's LoRA scorer cannot carry over configures none, with a
// finding; llm-d's scorer takes no parameters, checked strictly.
func TestPickerConfigLoRAFindings(t *testing.T) {
	const base = "[{type: prefix-cache-affinity-filter}, {type: token-load-scorer}, {type: lora-affinity-scorer}]"
	const refs = "{pluginRef: prefix-cache-affinity-filter}, {pluginRef: token-load-scorer}"
	for _, c := range []struct {
		doc  string
		want string
	}{
		{epc(base, "[{name: default, plugins: ["+refs+", {pluginRef: lora-affinity-scorer, weight: 0}]}]"), "plugins[lora-affinity-scorer]: unneeded"},
		{epc(base, "[{name: default, plugins: ["+refs+", {pluginRef: lora-affinity-scorer, weight: -1}]}]"), "plugins[lora-affinity-scorer]: none"},
		{epc(base, "[{name: default, plugins: ["+refs+"]}]"), "plugins[lora-affinity-scorer]: unneeded"},
		{epc(base, "[{name: default, plugins: ["+refs+"]}, {name: other, plugins: [{pluginRef: lora-affinity-scorer}]}]"), "plugins[lora-affinity-scorer]: none"},
	} {
		res := loadResult(t, c.doc)
		require.Nil(t, res.LoRA, c.doc)
		require.Contains(t, findingPaths(res.Findings), c.want, c.doc)
	}

	// One LoRA scorer: the first configures it, a second is a finding.
	res := loadResult(t, epc("[{type: prefix-cache-affinity-filter}, {type: token-load-scorer}, {name: a, type: lora-affinity-scorer}, {name: b, type: lora-affinity-scorer}]", ""))
	require.Equal(t, &lora.Config{}, res.LoRA)
	require.Contains(t, res.Findings, llmd.Finding{Path: "plugins[b]", Kind: llmd.Different, Note: "kvroute runs one LoRA scorer, configured by plugins[a]"})

	_, err := llmd.LoadResult(strings.NewReader(epc("[{type: lora-affinity-scorer, parameters: {maxLoras: 4}}]", "")), llmd.Options{})
	require.ErrorIs(t, err, kvroute.ErrInvalidConfig)
	require.ErrorContains(t, err, "plugins[lora-affinity-scorer].parameters.maxLoras: unknown key")
}

// Under P/D, llm-d's prefill and decode profiles may weigh the LoRA or the
// session scorer differently; kvroute takes the decode profile's weight,
// and a finding names both (an absent weight is llm-d's 1).
func TestPickerConfigPrefillWeightDiffers(t *testing.T) {
	for _, typ := range []string{"lora-affinity-scorer", "session-affinity-scorer"} {
		doc := strings.Replace(pdConfig, "- type: max-score-picker\n", "- type: max-score-picker\n- type: "+typ+"\n", 1)
		withPrefill := func(w string) string {
			return strings.Replace(doc, "    weight: 2\n  - pluginRef: max-score-picker\n- name: decode",
				"    weight: 2\n  - pluginRef: "+typ+w+"\n  - pluginRef: max-score-picker\n- name: decode", 1) +
				"  - pluginRef: " + typ + "\n    weight: 3\n"
		}
		at := "schedulingProfiles[prefill].plugins[" + typ + "].weight"
		res := loadResult(t, withPrefill("\n    weight: 5"))
		if typ == "lora-affinity-scorer" {
			require.Equal(t, &lora.Config{Weight: 3}, res.LoRA)
		} else {
			require.Equal(t, 3.0, res.Session.Weight)
		}
		var f *llmd.Finding
		for i := range res.Findings {
			if res.Findings[i].Path == at {
				f = &res.Findings[i]
			}
		}
		require.NotNil(t, f, typ)
		require.Equal(t, llmd.Different, f.Kind)
		require.Contains(t, f.Note, `llm-d weighs it 5 in the prefill profile "prefill" and 3 in the decode profile "decode"`)
		require.Contains(t, f.Note, "3, the decode profile's")

		require.Contains(t, findingPaths(loadResult(t, withPrefill("")).Findings), at+": different", "llm-d's default weight 1 is not 3")
		require.NotContains(t, findingPaths(loadResult(t, withPrefill("\n    weight: 3")).Findings), at+": different")
	}
}
