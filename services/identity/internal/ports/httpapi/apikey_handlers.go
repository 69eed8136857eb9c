package httpapi

import (
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/command"
	"svc.dev/services/identity/internal/app/query"
	"svc.dev/services/identity/internal/domain/apikey"
)

type createAPIKeyRequest struct {
	Name           string   `json:"name"`
	OrganizationID string   `json:"organizationId"`
	ExpiresIn      *float64 `json:"expiresIn"`
	Prefix         string   `json:"prefix"`
}

func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	var req createAPIKeyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	if _, err := c.RequireKeyManager(); err != nil {
		return err
	}
	if req.Prefix != "" && req.Prefix != apikey.Prefix {
		return apikey.ErrInvalidPrefix
	}
	var expiresIn time.Duration // absent or null: the key never expires
	if req.ExpiresIn != nil {
		if expiresIn, err = apikey.Lifetime(*req.ExpiresIn); err != nil {
			return err
		}
	}
	k, raw, err := s.app.Commands.CreateAPIKey.Handle(r.Context(), command.CreateAPIKey{Caller: c, OrganizationID: req.OrganizationID,
		Name: req.Name, ExpiresIn: expiresIn})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPIKeyResponse(k, raw))
	return nil
}

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	ks, err := s.app.Queries.ListAPIKeys.Handle(r.Context(), query.ListAPIKeys{Caller: c, OrganizationID: r.URL.Query().Get("organizationId")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPIKeysResponse(ks))
	return nil
}

// revokeAPIKeyByPath is DELETE /api/auth/api-key/:id, the key named by the path.
func (s *Server) revokeAPIKeyByPath(w http.ResponseWriter, r *http.Request) error {
	return s.revokeAPIKey(w, r, mux.Vars(r)["id"])
}

type deleteAPIKeyRequest struct {
	KeyID string `json:"keyId"`
}

// deleteAPIKey is better-auth's POST /api/auth/api-key/delete {keyId}.
func (s *Server) deleteAPIKey(w http.ResponseWriter, r *http.Request) error {
	var req deleteAPIKeyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	return s.revokeAPIKey(w, r, req.KeyID)
}

func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request, id string) error {
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	if err := s.app.Commands.RevokeAPIKey.Handle(r.Context(), command.RevokeAPIKey{Caller: c, KeyID: id}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, successResponse{Success: true})
	return nil
}

type verifyAPIKeyRequest struct {
	Key string `json:"key"`
}

func (s *Server) verifyAPIKey(w http.ResponseWriter, r *http.Request) error {
	var req verifyAPIKeyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Key == "" {
		return auth.Invalid("key", "is required")
	}
	rec, err := s.app.Queries.VerifyAPIKey.Handle(r.Context(), query.VerifyAPIKey{Key: req.Key})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toVerifyResponse(rec))
	return nil
}
