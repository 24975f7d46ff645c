// Package deploy holds what operators install next to kvroute — Prometheus
// alert rules (prometheus/kvroute-alerts.yaml, with promtool unit tests in
// kvroute-alerts.test.yaml) and a Grafana dashboard (grafana/kvroute.json)
// — and the tests that keep them true to the metrics kvroute exports. It
// has no Go API; the package exists for its tests.
package deploy
