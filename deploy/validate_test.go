package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// crdVersion is one served version of a CustomResourceDefinition, ready to
// check objects the way the API server does on create: prune (an unknown
// field is an error here, as kubectl's strict field validation makes it),
// default, validate against the OpenAPI schema, then run the CEL rules.
type crdVersion struct {
	structural *structuralschema.Structural
	openapi    apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// schemas checks kvroute's manifests against the Kubernetes API: built-in
// kinds by strict decoding into client-go's types, custom resources by the
// CRDs in testdata/crds.
type schemas struct {
	crds map[schema.GroupVersionKind]*crdVersion
}

// loadSchemas reads every CRD in testdata/crds, checks it is a valid,
// structural CRD (what the API server requires before it serves one), and
// prepares each served version.
func loadSchemas(t *testing.T) *schemas {
	t.Helper()
	s := &schemas{crds: map[schema.GroupVersionKind]*crdVersion{}}
	files, err := filepath.Glob("testdata/crds/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, doc := range splitDocs(t, f, b) {
			s.addCRD(t, f, doc)
		}
	}
	return s
}

// addCRD checks one CRD and prepares its served versions.
func (s *schemas) addCRD(t *testing.T, f string, b []byte) {
	t.Helper()
	{
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.UnmarshalStrict(b, &crd), f)
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&crd)
		var internal apiextensions.CustomResourceDefinition
		require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&crd, &internal, nil), f)
		errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), &internal)
		require.Empty(t, errs, "%s is not a valid CustomResourceDefinition", f)
		for _, v := range internal.Spec.Versions {
			if !v.Served {
				continue
			}
			// The internal version keeps a schema shared by every version
			// in spec.validation.
			validation := internal.Spec.Validation
			if v.Schema != nil {
				validation = v.Schema
			}
			props := validation.OpenAPIV3Schema
			st, err := structuralschema.NewStructural(props)
			require.NoError(t, err, f)
			openapi, _, err := apiservervalidation.NewSchemaValidator(props)
			require.NoError(t, err, f)
			gvk := schema.GroupVersionKind{Group: internal.Spec.Group, Version: v.Name, Kind: internal.Spec.Names.Kind}
			s.crds[gvk] = &crdVersion{structural: st, openapi: openapi, cel: cel.NewValidator(st, true, celconfig.PerCallLimit)}
		}
	}
}

// splitDocs splits a multi-document YAML stream, leaving out documents
// that hold only comments.
func splitDocs(t *testing.T, name string, stream []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err, name)
		var probe map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &probe), "%s, document %d", name, i)
		if len(probe) > 0 {
			docs = append(docs, doc)
		}
	}
}

// validateAll validates every object of a multi-document YAML stream and
// returns their kinds in order.
func (s *schemas) validateAll(t *testing.T, name string, stream []byte) []schema.GroupVersionKind {
	t.Helper()
	var kinds []schema.GroupVersionKind
	for i, doc := range splitDocs(t, name, stream) {
		gvk, err := s.validate(doc)
		require.NoError(t, err, "%s, object %d", name, i)
		kinds = append(kinds, gvk)
	}
	return kinds
}

// validate checks one object and returns its kind.
func (s *schemas) validate(doc []byte) (schema.GroupVersionKind, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return schema.GroupVersionKind{}, err
	}
	gvk := tm.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return gvk, fmt.Errorf("no apiVersion and kind")
	}
	if v, ok := s.crds[gvk]; ok {
		return gvk, v.validate(doc)
	}
	if !scheme.Scheme.Recognizes(gvk) {
		return gvk, fmt.Errorf("%s is neither a built-in kind nor a kind of testdata/crds", gvk)
	}
	// Strict decoding fails on unknown and duplicate fields, as
	// kubectl apply --validate=strict does.
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return gvk, err
	}
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	if _, _, err := dec.Decode(js, nil, nil); err != nil {
		return gvk, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	return gvk, nil
}

func (v *crdVersion) validate(doc []byte) error {
	// The API server's JSON decoding: whole numbers are int64.
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		return err
	}
	// metadata is the API server's ObjectMeta, unknown fields included.
	if md, ok := obj["metadata"]; ok {
		b, err := yaml.Marshal(md)
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(b, &metav1.ObjectMeta{}); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
	}
	pruned := pruning.PruneWithOptions(obj, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(pruned) > 0 {
		return fmt.Errorf("unknown fields %s", strings.Join(pruned, ", "))
	}
	structuraldefaulting.Default(obj, v.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, v.openapi)
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	errs = append(errs, celErrs...)
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}
