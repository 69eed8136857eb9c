package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// identity is the identity the gateway signs into a request it forwards: the JSON of
// libs/internalauth.Identity.
type identity struct {
	UserID         string `json:"uid,omitempty"`
	Email          string `json:"email,omitempty"`
	OrganizationID string `json:"org,omitempty"`
	AuthMode       string `json:"mode"`
	APIKeyID       string `json:"key,omitempty"`
}

// signIdentity sets the headers libs/internalauth.Signer.Sign sets: id signed under secret for
// one request (method, path) at now, which a service accepts for 30 s. It is a copy of that
// wire format, not an import: the tools module does not depend on svc.dev/libs. Should the two
// drift apart, the service answers 401 and the scenario that signs says so before it measures
// anything; TestSignIdentity pins the format to a signature the library made.
func signIdentity(h http.Header, secret []byte, method, path string, id identity, now time.Time) {
	raw, _ := json.Marshal(id) // a struct of strings always marshals
	payload := base64.RawURLEncoding.EncodeToString(raw)
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "svc-identity-v1\n%s\n%s\n%s\n%s", ts, method, path, payload)
	h.Set("X-Svc-Identity", payload)
	h.Set("X-Svc-Identity-Ts", ts)
	h.Set("X-Svc-Identity-Sig", base64.RawURLEncoding.EncodeToString(m.Sum(nil)))
}
