package query

import (
	"svc.dev/proto/connectors"
	"svc.dev/services/workflow-editor/internal/domain/catalog"
)

// ListConnectorsHandler lists the public catalog: hidden params are never in it.
type ListConnectorsHandler struct{ cat *catalog.Catalog }

// NewListConnectorsHandler returns the handler.
func NewListConnectorsHandler(cat *catalog.Catalog) ListConnectorsHandler {
	if cat == nil {
		panic("nil catalog")
	}
	return ListConnectorsHandler{cat: cat}
}

// Handle returns the catalog.
func (h ListConnectorsHandler) Handle() []connectors.Entry { return h.cat.Public() }
