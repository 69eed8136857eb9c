package credential_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/domain/credential"
	"svc.dev/services/identity/internal/domain/session"
)

func signer(t testing.TB) session.Signer {
	t.Helper()
	s, err := session.NewSigner([]byte(strings.Repeat("s", 32)))
	require.NoError(t, err)
	return s
}

func TestParse(t *testing.T) {
	t.Parallel()
	s := signer(t)
	tok := session.NewToken()
	tok2 := session.NewToken()
	key := "svc_" + strings.Repeat("K", 64)
	key2 := "svc_" + strings.Repeat("k", 64)
	cookie := credential.CookieName + "=" + url.QueryEscape(s.Sign(tok2))

	for _, tc := range []struct {
		name                    string
		auth, cookie, xAPIKey   string
		sessions                []session.Token
		keys                    []string
		sessionSent, apiKeySent bool
	}{
		{name: "Nothing"},
		{name: "BearerRaw", auth: "Bearer " + string(tok), sessions: []session.Token{tok}, sessionSent: true},
		{name: "BearerSigned", auth: "Bearer " + s.Sign(tok), sessions: []session.Token{tok}, sessionSent: true},
		{name: "BearerSignedEncoded", auth: "bearer " + url.QueryEscape(s.Sign(tok)), sessions: []session.Token{tok}, sessionSent: true},
		{name: "BearerForged", auth: "Bearer " + string(tok) + ".AAAA", sessionSent: true},
		{name: "BearerGarbage", auth: "Bearer not-a-session", sessionSent: true},
		{name: "OtherScheme", auth: "Basic " + string(tok)},
		{name: "Cookie", cookie: "a=b; " + cookie + "; c=d", sessions: []session.Token{tok2}, sessionSent: true},
		{name: "CookieQuoted", cookie: credential.CookieName + `="` + url.QueryEscape(s.Sign(tok2)) + `"`, sessions: []session.Token{tok2}, sessionSent: true},
		{name: "CookieUnsigned", cookie: credential.CookieName + "=" + string(tok2), sessionSent: true},
		{name: "CookieForged", cookie: credential.CookieName + "=forged", sessionSent: true},
		{name: "OtherCookie", cookie: "better-auth.session_token=" + url.QueryEscape(s.Sign(tok2))},
		{name: "BearerThenCookie", auth: "Bearer " + string(tok), cookie: cookie, sessions: []session.Token{tok, tok2}, sessionSent: true},
		{name: "BearerKey", auth: "Bearer " + key, keys: []string{key}, apiKeySent: true},
		{name: "HeaderKey", xAPIKey: key, keys: []string{key}, apiKeySent: true},
		{name: "BothKeys", auth: "Bearer " + key, xAPIKey: key2, keys: []string{key, key2}, apiKeySent: true},
		{name: "SameKeyTwice", auth: "Bearer " + key, xAPIKey: key, keys: []string{key}, apiKeySent: true},
		{name: "MalformedKey", xAPIKey: "svc_notakey", apiKeySent: true},
		{name: "MalformedBearerKey", auth: "Bearer svc_notakey", apiKeySent: true},
		{name: "CookieAndKey", cookie: cookie, xAPIKey: key, sessions: []session.Token{tok2}, keys: []string{key}, sessionSent: true, apiKeySent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := credential.Parse(tc.auth, tc.cookie, tc.xAPIKey, s)
			require.Equal(t, tc.sessions, c.Sessions)
			require.Equal(t, tc.keys, c.APIKeys)
			require.Equal(t, tc.sessionSent, c.SessionPresented)
			require.Equal(t, tc.apiKeySent, c.APIKeyPresented)
			require.Equal(t, len(tc.sessions)+len(tc.keys) == 0, c.Empty())
		})
	}
}

func TestCookie(t *testing.T) {
	t.Parallel()
	v, ok := credential.Cookie("x=1; svc.session_token=abc; svc.session_token=def", credential.CookieName)
	require.True(t, ok)
	require.Equal(t, "abc", v, "the first one wins")
	_, ok = credential.Cookie("svc.session_token=", credential.CookieName)
	require.False(t, ok)
	_, ok = credential.Cookie("xsvc.session_token=abc", credential.CookieName)
	require.False(t, ok)
}

// FuzzParseCredentials holds the parser to its promises on any input: it never panics, every
// candidate is well-formed, and no session token comes out that the input did not carry.
func FuzzParseCredentials(f *testing.F) {
	s := signer(f)
	tok := session.NewToken()
	f.Add("Bearer "+string(tok), "", "")
	f.Add("Bearer "+s.Sign(tok), "", "")
	f.Add("", credential.CookieName+"="+url.QueryEscape(s.Sign(tok)), "")
	f.Add("Bearer svc_"+strings.Repeat("a", 64), "", "svc_"+strings.Repeat("b", 64))
	f.Add("bearer %zz", "svc.session_token=\"%\"; ;=;", "svc_")
	f.Add("Bearer a.b.c", "svc.session_token=a.b", " ")
	f.Fuzz(func(t *testing.T, auth, cookie, key string) {
		c := credential.Parse(auth, cookie, key, s)
		require.LessOrEqual(t, len(c.Sessions), 2)
		require.LessOrEqual(t, len(c.APIKeys), 2)
		for _, tk := range c.Sessions {
			_, ok := session.ParseToken(string(tk))
			require.True(t, ok)
			inAuth := strings.Contains(auth, string(tk))
			inCookie := strings.Contains(cookie, string(tk))
			require.True(t, inAuth || inCookie, "token %q came from nowhere", tk)
		}
		for _, k := range c.APIKeys {
			require.True(t, strings.Contains(auth, k) || strings.Contains(key, k))
		}
	})
}

// FuzzCookie: any Cookie header parses without panicking into a value it contains.
func FuzzCookie(f *testing.F) {
	f.Add("a=b; svc.session_token=x")
	f.Add(`svc.session_token=""`)
	f.Add(";;;=;svc.session_token")
	f.Fuzz(func(t *testing.T, header string) {
		v, ok := credential.Cookie(header, credential.CookieName)
		if ok {
			require.NotEmpty(t, v)
			require.Contains(t, header, v)
		}
	})
}
