package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gofiber/fiber/v2"
)

// Problem is an RFC 9457 problem document with a stable machine code. Handlers return one as
// their error; the error handler writes it with the request id.
type Problem struct {
	Type      string         `json:"type"`
	Title     string         `json:"title"`
	Status    int            `json:"status"`
	Detail    string         `json:"detail,omitempty"`
	Code      string         `json:"code"`
	RequestID string         `json:"request_id,omitempty"`
	Extra     map[string]any `json:"-"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail) }

// NewProblem builds a problem; code is a stable snake_case identifier clients can switch on.
func NewProblem(status int, code, detail string) *Problem {
	return &Problem{Type: "https://partnerstream.io/problems/" + code, Title: http.StatusText(status), Status: status, Code: code, Detail: detail}
}

// With adds a member to the document (e.g. "allowed" transitions, "errors" per field).
func (p *Problem) With(key string, v any) *Problem {
	if p.Extra == nil {
		p.Extra = map[string]any{}
	}
	p.Extra[key] = v
	return p
}

func (p *Problem) body() map[string]any {
	m := map[string]any{"type": p.Type, "title": p.Title, "status": p.Status, "code": p.Code}
	if p.Detail != "" {
		m["detail"] = p.Detail
	}
	if p.RequestID != "" {
		m["request_id"] = p.RequestID
	}
	for k, v := range p.Extra {
		m[k] = v
	}
	return m
}

// fiberCodes maps Fiber's own errors (unknown route, wrong method, body too large) to codes.
var fiberCodes = map[int]string{
	fiber.StatusNotFound:              "not_found",
	fiber.StatusMethodNotAllowed:      "method_not_allowed",
	fiber.StatusRequestEntityTooLarge: "body_too_large",
	fiber.StatusBadRequest:            "bad_request",
	fiber.StatusUnsupportedMediaType:  "unsupported_media_type",
	fiber.StatusTooManyRequests:       "rate_limited",
	fiber.StatusRequestTimeout:        "timeout",
}

// errorHandler turns every error into problem+json; anything unexpected becomes a 500 whose
// detail never leaks internals (the log keeps them, under the same request id).
func errorHandler(log *slog.Logger, path func(*fiber.Ctx) string) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		var p *Problem
		var fe *fiber.Error
		switch {
		case errors.As(err, &p):
		case errors.As(err, &fe):
			code, ok := fiberCodes[fe.Code]
			if !ok {
				code = "http_error"
			}
			p = NewProblem(fe.Code, code, fe.Message)
		default:
			log.Error("request failed", "request_id", RequestID(c), "method", c.Method(), "path", path(c), "err", err)
			p = NewProblem(fiber.StatusInternalServerError, "internal", "an unexpected error occurred; quote the request_id when reporting it")
		}
		cp := *p
		cp.RequestID = RequestID(c)
		c.Set(fiber.HeaderContentType, "application/problem+json")
		return c.Status(cp.Status).JSON(cp.body(), "application/problem+json")
	}
}
