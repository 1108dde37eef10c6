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

// Middleware returns HTTP middleware that checks each request's
// Fencing-Token header with g.Check on the resource named by resource(r),
// and passes accepted requests on; the handler reads the token with
// TokenFromContext. Others get a JSON error: 400 for a bad header, an empty
// resource or ErrInvalidToken; 409 for a stale token; 503 for other errors
// from g, unshown (wrap g to log them); 500 for nil arguments. The handler's
// write must check the token again (SQLGuard.CheckTx, RedisGuard.Write). See
// docs/fencing.md, Guards.
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
