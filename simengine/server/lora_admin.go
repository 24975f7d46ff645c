package server

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
)

// Runtime LoRA updating (Config.AllowRuntimeLoRAUpdating): vLLM's
// POST /v1/load_lora_adapter and /v1/unload_lora_adapter, which it serves
// only with VLLM_ALLOW_RUNTIME_LORA_UPDATING set (without, both are
// unknown paths: a bare 404).
//
// A load registers an adapter name on the base model's engine: requests
// naming it run with that LoRA (lora_id the next of a counter the
// LoRAModules started, as vLLM's lora_id_counter), and /v1/models lists it
// with the base model as parent and its lora_path as root, so that a
// router polling /v1/models sees it appear. An unload forgets it (requests
// naming it are then a 404) and frees its adapter slot unless a batch uses
// it; a later load gets a new lora_id. The answers are vLLM's: 200 with a
// plain-text "Success: ..." body; 400 InvalidUserInput for a name or path
// missing or empty, or an adapter already registered without
// "load_inplace": true (which re-registers it under its lora_id); 404
// NotFoundError for an unload of an adapter not registered; a body that is
// not application/json, 400 (checkJSONType). Beyond vLLM, a name that is
// the server's model or one of its extra models is refused with 400 as
// well: the simulated server keys each name to one engine.

// loraRegistry is the server's adapters: LoRAModules at start, then those
// loaded and unloaded at run time. Guarded by mu.
type loraRegistry struct {
	mu    sync.RWMutex
	ids   map[string]int    // name → lora_id
	roots map[string]string // name → lora_path (its /v1/models root)
	order []string          // names in registration order, as /v1/models lists them
	next  int               // the last lora_id given
}

func newLoRARegistry() *loraRegistry {
	return &loraRegistry{ids: map[string]int{}, roots: map[string]string{}}
}

// id returns adapter name's lora_id, false when it is not registered.
func (l *loraRegistry) id(name string) (int, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	id, ok := l.ids[name]
	return id, ok
}

// add registers name with root; an adapter already registered keeps its
// lora_id (a load in place) and its place in the order.
func (l *loraRegistry) add(name, root string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.ids[name]; !ok {
		l.next++
		l.ids[name] = l.next
		l.order = append(l.order, name)
	}
	l.roots[name] = root
}

// remove forgets name and reports whether it was registered.
func (l *loraRegistry) remove(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.ids[name]; !ok {
		return false
	}
	delete(l.ids, name)
	delete(l.roots, name)
	l.order = slices.DeleteFunc(l.order, func(n string) bool { return n == name })
	return true
}

// list returns the registered adapters and their roots, in order.
func (l *loraRegistry) list() (names, roots []string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	names = slices.Clone(l.order)
	roots = make([]string, len(names))
	for i, n := range names {
		roots[i] = l.roots[n]
	}
	return names, roots
}

// typeInvalidUserInput is the ErrorResponse type of vLLM's LoRA
// load/unload refusals.
const typeInvalidUserInput = "InvalidUserInput"

// loadLoRARequest is vLLM's LoadLoRAAdapterRequest. Missing fields are
// told from empty ones: vLLM's model requires both (a 400 either way).
type loadLoRARequest struct {
	LoRAName    *string `json:"lora_name"`
	LoRAPath    *string `json:"lora_path"`
	LoadInplace bool    `json:"load_inplace"`
}

// unloadLoRARequest is vLLM's UnloadLoRAAdapterRequest.
type unloadLoRARequest struct {
	LoRAName  *string `json:"lora_name"`
	LoRAIntID *int    `json:"lora_int_id"`
}

// handleLoadLoRA serves POST /v1/load_lora_adapter.
func (s *Server) handleLoadLoRA(w http.ResponseWriter, r *http.Request) {
	var req loadLoRARequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	if req.LoRAName == nil || req.LoRAPath == nil || *req.LoRAName == "" || *req.LoRAPath == "" {
		writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeInvalidUserInput,
			message: "Both 'lora_name' and 'lora_path' must be provided."})
		return
	}
	name := *req.LoRAName
	if s.isBaseName(name) || slices.Contains(s.cfg.ExtraModels, name) {
		writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeInvalidUserInput,
			message: fmt.Sprintf("The lora adapter '%s' is named as a model this server serves.", name)})
		return
	}
	if _, ok := s.loras.id(name); ok && !req.LoadInplace {
		writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeInvalidUserInput,
			message: fmt.Sprintf("The lora adapter '%s' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.", name)})
		return
	}
	s.loras.add(name, *req.LoRAPath)
	writeText(w, http.StatusOK, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", name))
}

// handleUnloadLoRA serves POST /v1/unload_lora_adapter.
func (s *Server) handleUnloadLoRA(w http.ResponseWriter, r *http.Request) {
	var req unloadLoRARequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	if req.LoRAName == nil || *req.LoRAName == "" {
		writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeInvalidUserInput,
			message: "'lora_name' needs to be provided to unload a LoRA adapter."})
		return
	}
	name := *req.LoRAName
	if !s.loras.remove(name) {
		writeAPIError(w, &apiError{status: http.StatusNotFound, typ: typeNotFound,
			message: fmt.Sprintf("The lora adapter '%s' cannot be found.", name)})
		return
	}
	s.eng.UnloadLoRA(name)
	writeText(w, http.StatusOK, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", name))
}

// writeText writes a plain-text body, as vLLM's load/unload routes answer
// success (a bare Response with the message).
func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", fmt.Sprint(len(msg)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg))
}
