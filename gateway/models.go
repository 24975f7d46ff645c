package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/modelcard"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/render"
)

// Several models behind one gateway (ServerConfig.Models): each request's
// model is resolved through the rewrite table, checked against the models
// the endpoints serve (a model none serves is answered 404 NotFoundError,
// as vLLM answers a model it does not serve, before anything is routed),
// written into the body when the table rewrote it, and handed to the
// Router as Request.Model, which routes it among the endpoints serving it
// and matches it against its own cache. A model an engine's /v1/models
// lists with a parent (a LoRA adapter of that base model, as vLLM lists
// the adapters it has registered), or whose base the configuration's
// Models.Adapters names, is routed as a LoRA request: Request.LoRA
// names it too, so that the LoRA scorer (ServerConfig.LoRA) places it and
// the DefaultMMLoRAs rule leaves it alone; it still goes only to the
// endpoints listing it (vLLM answers 404 for an adapter it has not
// registered) and its block keys are rooted with its name either way, as
// vLLM's lora_name roots them. GET /v1/models lists the served models and
// the rewrite table's names that have a served target, each with the card
// the engines gave it (serveServedModels).

// routeModel sets req's model in multi-model mode. It returns the body to
// forward (rewritten when the table changed the model), what the rewritten
// copy holds of the body budget (which the caller releases once the
// response has ended), the rewrite it drew, and false when it has answered
// the request itself: a rewritten copy that finds no room in the budget is
// answered 503, as a body is. The caller counts the rewrite (countRewrite)
// only once it sends the request to an endpoint: one answered here, or
// refused by the pick (a target the Router does not serve:
// kvroute.ErrModelMismatch) or by the admission, was not sent as the
// target.
func (h *Handler) routeModel(w http.ResponseWriter, api render.API, am *apiMetrics, req *kvroute.Request, body []byte, model string, eps []kvroute.Endpoint) ([]byte, int64, rewrite, bool) {
	name := model
	if name == "" {
		name = h.cfg.Model
	}
	target, rewritten := h.served.Resolve(name)
	if !models.Serves(eps, target, h.cfg.Model) {
		am.results[ResultBadRequest].Inc()
		writeModelNotFound(w, api, name)
		return nil, 0, rewrite{}, false
	}
	var held int64
	if rewritten && target != model {
		nb, err := setBodyModel(body, target)
		if err != nil {
			am.results[ResultBadRequest].Inc()
			writeError(w, api, http.StatusBadRequest, "rewriting the request's model: "+err.Error())
			return nil, 0, rewrite{}, false
		}
		// A second copy of the body, held with the first until the
		// response ends.
		if held = int64(cap(nb)); !h.budget.Acquire(held) {
			h.refuseBodyBudget(w, api, am)
			return nil, 0, rewrite{}, false
		}
		body = nb
		req.Body = nb
	}
	req.Model = target
	if _, adapter := h.served.Adapter(eps, target); adapter {
		req.LoRA = target
	}
	return body, held, rewrite{from: name, to: target, drawn: rewritten}, true
}

// rewrite is what routeModel drew from the rewrite table for one request:
// the name it gave (from) and the model it is sent as (to), drawn false
// when the table had no rule for the name.
type rewrite struct {
	from, to string
	drawn    bool
}

// countRewrite counts rw in kvroute_models_rewrites_total
// (models.Registry.Applied) when the table drew it. The caller calls it
// once, when it sends the request to an endpoint.
func (h *Handler) countRewrite(rw rewrite) {
	if rw.drawn {
		h.served.Applied(rw.from, rw.to)
	}
}

// writeModelNotFound answers a model no endpoint serves: vLLM's 404
// NotFoundError with param "model".
func writeModelNotFound(w http.ResponseWriter, api render.API, model string) {
	writeParamError(w, api, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", model), "model")
}

// setBodyModel returns body with its top-level "model" set to model. Only
// rewritten requests (an alias or a canary) pay for it.
func setBodyModel(body []byte, model string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	v, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	m["model"] = v
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// serveServedModels answers GET /v1/models in multi-model mode: the models
// the endpoints serve and the names the rewrite table accepts while one of
// their targets is served, as vLLM's model list: each a ModelCard carrying
// what the engines' own cards said of it (models.Registry.Cards: owned_by,
// root, parent, max_model_len; null or, for owned_by, "kvroute" when no
// engine said; a rewritten name has the parent of the adapter it is routed
// as), created the time of the answer as vLLM's is, and vLLM's permission
// list: one ModelPermission of fixed defaults.
func (h *Handler) serveServedModels(w http.ResponseWriter) {
	cards := h.served.Cards(*h.endpoints.Load(), h.cfg.Model)
	type model struct {
		ID          string                 `json:"id"`
		Object      string                 `json:"object"`
		Created     int64                  `json:"created"`
		OwnedBy     string                 `json:"owned_by"`
		Root        *string                `json:"root"`
		Parent      *string                `json:"parent"`
		MaxModelLen *int                   `json:"max_model_len"`
		Permission  []modelcard.Permission `json:"permission"`
	}
	orNull := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	created := h.now().Unix()
	data := make([]model, 0, len(cards))
	for _, c := range cards {
		m := model{ID: c.ID, Object: "model", Created: created, OwnedBy: c.OwnedBy, Root: orNull(c.Root),
			Parent: orNull(c.Parent), Permission: modelcard.List(created)}
		if m.OwnedBy == "" {
			m.OwnedBy = "kvroute"
		}
		if c.MaxModelLen > 0 {
			m.MaxModelLen = &c.MaxModelLen
		}
		data = append(data, m)
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(map[string]any{"object": "list", "data": data})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}
