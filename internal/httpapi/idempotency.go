package httpapi

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/idempotency"
)

// IdempotencyStore remembers responses by key.
type IdempotencyStore interface {
	Begin(ctx context.Context, r idempotency.Request) (*idempotency.Response, error)
	Complete(ctx context.Context, r idempotency.Request, resp idempotency.Response) error
	Abandon(ctx context.Context, r idempotency.Request) error
}

const idempotencyHeader = "Idempotency-Key"

// Idempotent wraps a creating POST handler: with an Idempotency-Key header, a retry with the
// same body gets the first response (with Idempotent-Replayed: true), another body under the
// same key gets 422, and a retry while the first is running gets 409. Server errors are not
// remembered, so they can be retried.
func (s *Server) Idempotent(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		key := c.Get(idempotencyHeader)
		if key == "" || s.idem == nil {
			return h(c)
		}
		if len(key) > 255 {
			return NewProblem(fiber.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key must be at most 255 characters")
		}
		if msg := freetext.Check(key, 1, 255, false); msg != "" {
			return NewProblem(fiber.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key "+msg)
		}
		req := idempotency.Request{Principal: Caller(c).ID(), Key: key, Method: c.Method(), Path: c.Path(), Body: c.Body()}
		stored, err := s.idem.Begin(c.UserContext(), req)
		switch {
		case errors.Is(err, idempotency.ErrMismatch):
			return NewProblem(fiber.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was already used with a different request")
		case errors.Is(err, idempotency.ErrInFlight):
			c.Set(fiber.HeaderRetryAfter, "1")
			return NewProblem(fiber.StatusConflict, "idempotency_key_in_progress", "a request with this Idempotency-Key is still being processed")
		case err != nil:
			return err
		case stored != nil:
			c.Set("Idempotent-Replayed", "true")
			c.Set(fiber.HeaderContentType, stored.ContentType)
			return c.Status(stored.Status).Send(stored.Body)
		}
		herr := h(c)
		if herr != nil {
			// Let the error handler write the response first, then decide what to keep.
			if werr := c.App().ErrorHandler(c, herr); werr != nil {
				_ = s.idem.Abandon(context.WithoutCancel(c.UserContext()), req)
				return werr
			}
		}
		status := c.Response().StatusCode()
		if status >= 500 {
			return s.idem.Abandon(context.WithoutCancel(c.UserContext()), req)
		}
		resp := idempotency.Response{Status: status, ContentType: string(c.Response().Header.ContentType()), Body: append([]byte(nil), c.Response().Body()...)}
		return s.idem.Complete(context.WithoutCancel(c.UserContext()), req, resp)
	}
}
