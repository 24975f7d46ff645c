package extproc

import (
	"encoding/json"
	"errors"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// modelMember is the one member of a request body the picker reads.
var modelMember = []string{"model"}

// requestModel returns the top-level "model" of a request body, "" when it
// is absent or null; the body must be one JSON object. The member is found
// as vLLM reads it (jsonscan.Members): by its exact name, the last one when
// repeated. encoding/json would take a "Model" or "MODEL" member vLLM
// ignores as the model, and pick an engine, or a LoRA adapter's blocks, for
// a model the engine does not run the request on.
func requestModel(body []byte) (string, error) {
	var v [1][]byte
	if err := jsonscan.Members(body, modelMember, v[:]); err != nil {
		return "", err
	}
	if v[0] == nil {
		return "", nil
	}
	var model *string
	if err := json.Unmarshal(v[0], &model); err != nil {
		return "", errors.New("model must be a string")
	}
	if model == nil {
		return "", nil
	}
	return *model, nil
}
