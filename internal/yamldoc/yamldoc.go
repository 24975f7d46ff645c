package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// ErrSeveralDocuments is the error of a stream of more than one non-empty
// document; its text follows the name of the file that holds it.
var ErrSeveralDocuments = errors.New("holds more than one document (a \"---\" between two, or JSON values one after another): kvroute reads one; merge them")

// One returns ErrSeveralDocuments if data holds more than one non-empty YAML
// document, and the YAML syntax error of any of them.
func One(data []byte) error {
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if v == nil {
			continue
		}
		if docs++; docs > 1 {
			return ErrSeveralDocuments
		}
	}
}

// ToJSON converts a YAML (or JSON) document to JSON, refusing a key given
// twice in one mapping and a stream of more than one document (One).
func ToJSON(data []byte) ([]byte, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	if err := One(data); err != nil {
		if errors.Is(err, ErrSeveralDocuments) {
			return nil, err
		}
		// A later document's syntax error, worded as YAMLToJSONStrict
		// words the first's.
		return nil, fmt.Errorf("error converting YAML to JSON: %w", err)
	}
	return js, nil
}
