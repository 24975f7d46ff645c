package modelcard

import (
	"crypto/rand"
	"encoding/hex"
)

// Permission is vLLM's ModelPermission, as its model list encodes it.
type Permission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

// NewPermission returns a card's permission as vLLM fills it, created at
// created (Unix seconds), with a fresh ID.
func NewPermission(created int64) Permission {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return Permission{ID: "modelperm-" + hex.EncodeToString(b[:]), Object: "model_permission", Created: created,
		AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*"}
}

// List returns the permission list of one card: one NewPermission.
func List(created int64) []Permission { return []Permission{NewPermission(created)} }
