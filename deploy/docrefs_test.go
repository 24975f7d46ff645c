package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// docAlert matches an alert rule's name in a document.
var docAlert = regexp.MustCompile(`\bKvroute[A-Z][A-Za-z]+\b`)

// docPanel matches the dashboard panels a document names: "Title" panel,
// "A" and a "B" panel.
var docPanel = regexp.MustCompile(`"[A-Z][^"\n]*"(?:(?:\s+and\s+an?|,)\s+"[A-Z][^"\n]*")*\s+panel`)

// quoted matches one quoted title of a docPanel match.
var quoted = regexp.MustCompile(`"([^"]*)"`)

// ruleAlert matches an alert rule's name in the rules file.
var ruleAlert = regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`)

// TestDocumentsNameRealAlertsAndPanels holds the alert rules and dashboard
// panels the READMEs name to the files shipped under deploy/: each
// Kvroute... name is an alert of prometheus/kvroute-alerts.yaml and each
// "Title" panel a panel title of grafana/kvroute.json, as an operator
// searches for them.
func TestDocumentsNameRealAlertsAndPanels(t *testing.T) {
	rules, err := os.ReadFile("prometheus/kvroute-alerts.yaml")
	require.NoError(t, err)
	alerts := map[string]bool{}
	for _, m := range ruleAlert.FindAllStringSubmatch(string(rules), -1) {
		alerts[m[1]] = true
	}
	require.Greater(t, len(alerts), 10, "the rules file has alerts")

	var dash struct{ Panels []struct{ Title string } }
	b, err := os.ReadFile("grafana/kvroute.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &dash))
	panels := map[string]bool{}
	for _, p := range dash.Panels {
		panels[p.Title] = true
	}

	alertsNamed, panelsNamed := 0, 0
	for _, doc := range []string{"../README.md", "../bench/README.md", "helm/kvroute-epp/README.md"} {
		src, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, name := range docAlert.FindAllString(string(src), -1) {
			alertsNamed++
			require.True(t, alerts[name], "%s names the alert %s, which prometheus/kvroute-alerts.yaml does not have", doc, name)
		}
		for _, m := range docPanel.FindAllString(string(src), -1) {
			for _, q := range quoted.FindAllStringSubmatch(m, -1) {
				panelsNamed++
				require.True(t, panels[q[1]], "%s names the panel %q, which grafana/kvroute.json does not have", doc, q[1])
			}
		}
	}
	require.Greater(t, alertsNamed, 5, "the READMEs name alerts")
	require.GreaterOrEqual(t, panelsNamed, 3, "the READMEs name panels")
}
