package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/web"
)

func TestOrigins(t *testing.T) {
	t.Parallel()
	o, err := web.NewOrigins("https://app.example.com:443/", " ", "http://localhost:8080")
	require.NoError(t, err)
	_, err = web.NewOrigins("app.example.com")
	require.ErrorContains(t, err, "app.example.com")

	for _, tc := range []struct {
		name                     string
		origin, fetchSite, refer string
		want                     bool
	}{
		{name: "TrustedOrigin", origin: "https://APP.example.com", want: true},
		{name: "TrustedOriginDefaultPort", origin: "http://localhost:8080", fetchSite: "cross-site", want: true},
		{name: "CrossSiteOrigin", origin: "https://evil.example", want: false},
		{name: "SiblingSubdomain", origin: "https://evil.example.com", fetchSite: "same-site", want: false},
		{name: "NullOrigin", origin: "null", fetchSite: "same-origin", want: false},
		{name: "OtherPort", origin: "http://localhost:8081", want: false},
		{name: "NoOriginSameOrigin", fetchSite: "same-origin", want: true},
		{name: "NoOriginTypedAddress", fetchSite: "none", want: true},
		{name: "NoOriginSameSite", fetchSite: "same-site", refer: "https://app.example.com/x", want: false},
		{name: "NoOriginCrossSite", fetchSite: "cross-site", want: false},
		{name: "RefererTrusted", refer: "https://app.example.com/workflows?x=1", want: true},
		{name: "RefererUntrusted", refer: "https://evil.example/", want: false},
		{name: "Nothing", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/api/workflows", nil)
			for k, v := range map[string]string{"Origin": tc.origin, "Sec-Fetch-Site": tc.fetchSite, "Referer": tc.refer} {
				if v != "" {
					r.Header.Set(k, v)
				}
			}
			require.Equal(t, tc.want, o.SentByTrustedPage(r))
		})
	}
	for m, safe := range map[string]bool{"GET": true, "HEAD": true, "OPTIONS": true, "POST": false, "PUT": false, "PATCH": false, "DELETE": false, "PROPFIND": false} {
		require.Equal(t, safe, web.SafeMethod(m), m)
	}
}
