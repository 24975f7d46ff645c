package main

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeClients builds the Kubernetes clients discovery (and leader
// election, which shares discovery's) and the metrics port's reviews
// need: restClients, which tests replace with fake clientsets.
var kubeClients = restClients

// clientLimits is a Kubernetes client's client-side rate limit: qps
// requests a second, burst at once, shared by every API group of the
// clientset. The zero value leaves client-go's default, rest.DefaultQPS
// and rest.DefaultBurst (5 and 10) for each API group's client apart.
type clientLimits struct {
	qps   float32
	burst int
}

// discoveryClientLimits are the limits of discovery's client, which leader
// election shares: none, so that each API group keeps its own.
var discoveryClientLimits = clientLimits{}

// restClients builds the Kubernetes clients limited by limits, from
// kubeconfig or, when it is empty, the in-cluster configuration.
func restClients(kubeconfig string, limits clientLimits) (kubernetes.Interface, dynamic.Interface, error) {
	var (
		rc  *rest.Config
		err error
	)
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if limits != (clientLimits{}) {
		rc.QPS, rc.Burst = limits.qps, limits.burst
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return kube, dyn, nil
}
