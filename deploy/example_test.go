package deploy

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

// What `helm install guide ./deploy/helm/kvroute-epp -n llm` creates with
// the two values an operator must give (the model and the engines' pod
// labels): the picker and its RBAC, its configuration and the
// InferencePool that names it. The route and the monitoring objects are
// off unless asked for.
func Example() {
	ch, err := loader.Load(chartDir)
	if err != nil {
		fmt.Println(err)
		return
	}
	vals, err := chartutil.ReadValues([]byte(minimalValues))
	if err != nil {
		fmt.Println(err)
		return
	}
	top, err := chartutil.ToRenderValues(ch, vals,
		chartutil.ReleaseOptions{Name: "guide", Namespace: "llm", Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := engine.Render(ch, top)
	if err != nil {
		fmt.Println(err)
		return
	}
	var objects []string
	for name, manifest := range out {
		if path.Ext(name) != ".yaml" {
			continue // NOTES.txt, _helpers.tpl
		}
		for _, doc := range strings.Split(manifest, "\n---") {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				fmt.Println(name, err)
				return
			}
			if obj.Kind != "" {
				objects = append(objects, obj.Kind+" "+obj.Metadata.Name)
			}
		}
	}
	sort.Strings(objects)
	fmt.Println(strings.Join(objects, "\n"))
	// Output:
	// ConfigMap guide-epp
	// Deployment guide-epp
	// InferencePool guide
	// Role guide-epp
	// RoleBinding guide-epp
	// Service guide-epp
	// ServiceAccount guide-epp
}
