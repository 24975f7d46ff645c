// Package labelselector parses Kubernetes label selectors ("role=decode,
// zone in (a,b), !draining") without depending on Kubernetes' client
// libraries: it accepts exactly the texts labels.Parse of k8s.io/apimachinery
// accepts, with the same meaning, so a selector written for a Deployment or
// an InferencePool picks the same endpoints in kvroute's configuration.
// contrib/k8s checks the two parsers against each other on many inputs.
package labelselector
