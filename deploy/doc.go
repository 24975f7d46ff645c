// Package deploy holds what operators install to run kvroute on Kubernetes
// and watch it, and the tests that keep those files true to the APIs they are
// applied to and the metrics kvroute exports:
//
//   - kvroute-epp/: plain manifests for kvroute-epp as the endpoint picker of
//     an InferencePool (picker Deployment, RBAC, InferencePool, HTTPRoute,
//     monitoring), the vLLM Deployment patch the engines need, and the
//     picker's container image recipe (Dockerfile);
//   - helm/kvroute-epp: the same as a Helm chart, which also carries an llm-d
//     EndpointPickerConfig unchanged (its README);
//   - prometheus/kvroute-alerts.yaml: alert rules, with promtool unit tests
//     in kvroute-alerts.test.yaml;
//   - grafana/kvroute.json: a Grafana dashboard.
//
// Every object kvroute ships, in the manifests and as the chart renders it,
// is validated the way the API server would: built-in kinds by strict
// decoding into client-go's types (an unknown field fails), custom resources
// against the OpenAPI schemas and CEL rules of the CRDs in testdata/crds
// (pruning, defaulting and validation from k8s.io/apiextensions-apiserver).
// The chart is rendered with Helm's own chart loader and template engine.
// What the manifests say about kvroute-epp (its flags, the readiness path
// and port, the fallbacks bound, its metric names) is checked against the
// binary's usage or read from its source in contrib/extproc.
//
// # Why a module of its own
//
// Those checks need k8s.io/apiextensions-apiserver (and with it the API
// server's CEL and OpenAPI libraries) and helm.sh/helm/v3, large dependency
// trees that no kvroute binary or library needs. Keeping them in this module
// leaves kvroute's core module and the contrib modules without them.
//
// The package has no Go API; it exists for its tests.
package deploy
