package main

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeClients builds the Kubernetes clients discovery needs: restClients,
// which tests replace with fake clientsets.
var kubeClients = restClients

// restClients builds the Kubernetes clients discovery needs, from
// kubeconfig or, when it is empty, the in-cluster configuration.
func restClients(kubeconfig string) (kubernetes.Interface, dynamic.Interface, error) {
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
