package fencing

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/redfence/redfence/internal/nilcheck"
)

// HeaderName is the HTTP request header that carries a fencing token, in
// decimal.
const HeaderName = "Fencing-Token"

type tokenKey struct{}

// TokenFromContext returns the token that Middleware accepted for the
// request whose context is ctx, and whether there is one.
func TokenFromContext(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(Token)
	return t, ok
}

// Middleware returns HTTP middleware that fences requests: it reads the token
// from the Fencing-Token header, names the resource with resource(r), and
// calls g.Check before passing the request on. The handler finds the token
// with TokenFromContext.
//
// Requests it rejects get a JSON body {"error": "..."} and never reach the
// handler:
//
//   - 400 Bad Request: the header is missing, repeated, not a decimal
//     uint64, or 0; resource(r) is empty; or g rejects the token as invalid
//     (ErrInvalidToken, e.g. too large for SQLGuard).
//   - 409 Conflict: the token is stale. The body is
//     {"error": "stale fencing token", "resource": ..., "token": ..., "current": ...}
//     with the tokens as JSON numbers ("current" is left out if the guard
//     could not read it).
//   - 503 Service Unavailable: any other error from g, with the body
//     {"error": "fencing guard unavailable"}; the error itself is not shown
//     to the client (wrap g to log it).
//   - 500 Internal Server Error: g or resource is nil.
//
// Check only records the token: the handler's own write is not atomic with
// it, so a newer holder's request can pass Check and write in between. For
// full protection, make the handler's write check the token too (for
// example with SQLGuard.CheckTx or RedisGuard.Write, using the token from
// TokenFromContext); the middleware then rejects stale requests early.
func Middleware(g Guard, resource func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if nilcheck.IsNil(g) || resource == nil || next == nil {
				writeJSON(w, http.StatusInternalServerError, errorBody{Error: "fencing middleware misconfigured: nil guard, resource function or handler"})
				return
			}
			t, msg := parseHeader(r.Header.Values(HeaderName))
			if msg != "" {
				writeJSON(w, http.StatusBadRequest, errorBody{Error: msg})
				return
			}
			res := resource(r)
			if res == "" {
				writeJSON(w, http.StatusBadRequest, errorBody{Error: "empty resource"})
				return
			}
			err := g.Check(r.Context(), res, t)
			var stale *StaleTokenError
			switch {
			case err == nil:
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
			case errors.As(err, &stale):
				writeJSON(w, http.StatusConflict, staleBody{Error: "stale fencing token", Resource: stale.Resource, Token: stale.Token, Current: stale.Current})
			case errors.Is(err, ErrStaleToken):
				writeJSON(w, http.StatusConflict, staleBody{Error: "stale fencing token", Resource: res, Token: t})
			case errors.Is(err, ErrInvalidToken):
				writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
			default:
				writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "fencing guard unavailable"})
			}
		})
	}
}

// parseHeader returns the token in the header's values, or a message saying
// what is wrong with them.
func parseHeader(values []string) (Token, string) {
	switch len(values) {
	case 0:
		return 0, "missing " + HeaderName + " header"
	case 1:
	default:
		return 0, "more than one " + HeaderName + " header"
	}
	v := strings.TrimSpace(values[0])
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, "malformed " + HeaderName + " header: want a decimal token from 1 to 18446744073709551615"
	}
	if n == 0 {
		return 0, HeaderName + " 0 is not a token (0 means no token)"
	}
	return Token(n), ""
}

type errorBody struct {
	Error string `json:"error"`
}

type staleBody struct {
	Error    string `json:"error"`
	Resource string `json:"resource"`
	Token    Token  `json:"token"`
	Current  Token  `json:"current,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the status is sent; a failed body write has no one to tell
}
