package extproc

import (
	"encoding/json"
	"errors"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// bodyMembers are the members of a request body the picker reads: the
// model, and whether the client set kv_transfer_params.
var bodyMembers = []string{"model", "kv_transfer_params"}

// requestModel returns the top-level "model" of a request body, "" when it
// is absent or null; the body must be one JSON object. The member is found
// as vLLM reads it (jsonscan.Members): by its exact name, the last one when
// repeated. encoding/json would take a "Model" or "MODEL" member vLLM
// ignores as the model, and pick an engine, or a LoRA adapter's blocks, for
// a model the engine does not run the request on.
func requestModel(body []byte) (string, error) {
	model, _, err := requestMembers(body)
	return model, err
}

// requestMembers is requestModel, also reporting whether the body has a
// top-level kv_transfer_params member, found in the same pass.
func requestMembers(body []byte) (model string, transfer bool, err error) {
	var v [2][]byte
	if err := jsonscan.Members(body, bodyMembers, v[:]); err != nil {
		return "", false, err
	}
	model, err = memberModel(v[0])
	return model, v[1] != nil, err
}

// memberModel decodes the raw "model" member v (nil: absent).
func memberModel(v []byte) (string, error) {
	if v == nil {
		return "", nil
	}
	var model *string
	if err := json.Unmarshal(v, &model); err != nil {
		return "", errors.New("model must be a string")
	}
	if model == nil {
		return "", nil
	}
	return *model, nil
}
