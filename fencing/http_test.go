package fencing_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
)

// response is every field the middleware's JSON bodies can have.
type response struct {
	Error    string         `json:"error"`
	Resource string         `json:"resource"`
	Token    *fencing.Token `json:"token"`
	Current  *fencing.Token `json:"current"`
}

// fencedServer serves the middleware around a handler that reports the
// token it found in the context, with the resource taken from ?r=.
func fencedServer(t *testing.T, g fencing.Guard) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		tok, ok := fencing.TokenFromContext(r.Context())
		if !ok {
			http.Error(w, "no token in context", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "token "+tok.String())
	})
	resource := func(r *http.Request) string { return r.URL.Query().Get("r") }
	srv := httptest.NewServer(fencing.Middleware(g, resource)(handler))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// do sends a request with the given Fencing-Token header values.
func do(t *testing.T, srv *httptest.Server, resource string, tokens ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, srv.URL+"/?r="+resource, nil)
	require.NoError(t, err)
	for _, v := range tokens {
		req.Header.Add(fencing.HeaderName, v)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body), resp.Header
}

func decode(t *testing.T, body string) response {
	t.Helper()
	var r response
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), body)
	return r
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	srv, calls := fencedServer(t, fencing.NewMemoryGuard())

	status, body, _ := do(t, srv, "doc", "5")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "token 5", body, "the handler sees the token")

	status, body, _ = do(t, srv, "doc", " 5 ")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "token 5", body, "equal token, surrounding spaces ignored")

	status, body, _ = do(t, srv, "doc", "18446744073709551615")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "token 18446744073709551615", body)
	assert.Equal(t, int64(3), calls.Load())

	t.Run("stale is 409", func(t *testing.T) {
		status, body, h := do(t, srv, "doc", "4")
		require.Equal(t, http.StatusConflict, status, body)
		assert.Equal(t, "application/json", h.Get("Content-Type"))
		r := decode(t, body)
		assert.Equal(t, "stale fencing token", r.Error)
		assert.Equal(t, "doc", r.Resource)
		require.NotNil(t, r.Token)
		require.NotNil(t, r.Current)
		assert.Equal(t, fencing.Token(4), *r.Token)
		assert.Equal(t, fencing.Token(18446744073709551615), *r.Current, "uint64 tokens survive JSON exactly")
	})

	bad := []struct {
		name    string
		res     string
		headers []string
		msg     string
	}{
		{"missing header", "doc", nil, "missing Fencing-Token header"},
		{"empty header", "doc", []string{""}, "malformed Fencing-Token header"},
		{"not a number", "doc", []string{"abc"}, "malformed Fencing-Token header"},
		{"negative", "doc", []string{"-1"}, "malformed Fencing-Token header"},
		{"plus sign", "doc", []string{"+7"}, "malformed Fencing-Token header"},
		{"fraction", "doc", []string{"7.0"}, "malformed Fencing-Token header"},
		{"overflow", "doc", []string{"18446744073709551616"}, "malformed Fencing-Token header"},
		{"zero", "doc", []string{"0"}, "Fencing-Token 0 is not a token"},
		{"two headers", "doc", []string{"7", "8"}, "more than one Fencing-Token header"},
		{"empty resource", "", []string{"7"}, "empty resource"},
	}
	for _, c := range bad {
		t.Run(c.name+" is 400", func(t *testing.T) {
			status, body, h := do(t, srv, c.res, c.headers...)
			require.Equal(t, http.StatusBadRequest, status, body)
			assert.Equal(t, "application/json", h.Get("Content-Type"))
			r := decode(t, body)
			assert.Contains(t, r.Error, c.msg)
			assert.Nil(t, r.Token)
		})
	}
	assert.Equal(t, int64(3), calls.Load(), "rejected requests never reach the handler")

	status, body, _ = do(t, srv, "other", "1")
	require.Equal(t, http.StatusOK, status, body, "resources are fenced independently")
}

func TestMiddlewareGuardErrors(t *testing.T) {
	t.Parallel()
	t.Run("guard unavailable is 503", func(t *testing.T) {
		t.Parallel()
		node := redistest.Nodes(t, 1)[0]
		g := fencing.NewRedisGuard(redistest.Client(t, node.Addr()))
		srv, calls := fencedServer(t, g)
		status, body, _ := do(t, srv, "doc", "3")
		require.Equal(t, http.StatusOK, status, body)

		require.NoError(t, node.Kill())
		status, body, _ = do(t, srv, "doc", "4")
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		assert.Equal(t, "fencing guard unavailable", decode(t, body).Error)
		assert.NotContains(t, body, node.Addr(), "the backend's address is not shown to clients")
		assert.Equal(t, int64(1), calls.Load())
	})
	t.Run("token too large for the guard is 400", func(t *testing.T) {
		t.Parallel()
		g, _ := sqlGuard(t)
		srv, calls := fencedServer(t, g)
		status, body, _ := do(t, srv, "doc", "9223372036854775808")
		require.Equal(t, http.StatusBadRequest, status, body)
		assert.Contains(t, decode(t, body).Error, "BIGINT")
		status, body, _ = do(t, srv, "doc", "9223372036854775807")
		require.Equal(t, http.StatusOK, status, body)
		assert.Equal(t, int64(1), calls.Load())
	})
	t.Run("nil guard or resource function is 500", func(t *testing.T) {
		t.Parallel()
		ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler reached") })
		var nilMemory *fencing.MemoryGuard
		for name, h := range map[string]http.Handler{
			"nil guard":         fencing.Middleware(nil, func(*http.Request) string { return "r" })(ok),
			"typed nil guard":   fencing.Middleware(nilMemory, func(*http.Request) string { return "r" })(ok),
			"nil resource func": fencing.Middleware(fencing.NewMemoryGuard(), nil)(ok),
			"nil handler":       fencing.Middleware(fencing.NewMemoryGuard(), func(*http.Request) string { return "r" })(nil),
		} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(fencing.HeaderName, "1")
			h.ServeHTTP(rec, req)
			assert.Equal(t, http.StatusInternalServerError, rec.Code, name)
			assert.Contains(t, decode(t, rec.Body.String()).Error, "misconfigured", name)
		}
	})
}

func TestTokenFromContextWithoutMiddleware(t *testing.T) {
	t.Parallel()
	tok, ok := fencing.TokenFromContext(t.Context())
	assert.False(t, ok)
	assert.Zero(t, tok)
}
