package httpapi

import (
	"context"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
)

// APIKeyStore is what the API key routes need from the identity store.
type APIKeyStore interface {
	CreateAPIKey(ctx context.Context, companyID, name string) (string, identity.APIKey, error)
	CreatePublishableKey(ctx context.Context, companyID, programID, name string) (string, identity.APIKey, error)
	ListAPIKeys(ctx context.Context, companyID string, p page.Request) ([]identity.APIKey, string, error)
	RevokeAPIKey(ctx context.Context, companyID, keyID string) (string, error)
	CompanyByID(ctx context.Context, id string) (identity.Company, error)
}

// forgetter is implemented by key authenticators with a cache to evict on revocation.
type forgetter interface{ Forget(hashHex string) }

// createdAPIKey is the one response that carries the key itself.
type createdAPIKey struct {
	identity.APIKey
	Key string `json:"key"`
}

// MountAPIKeys adds the dashboard's API key routes and the partner API's `me`.
func (s *Server) MountAPIKeys(store APIKeyStore) {
	h := apiKeyHandlers{store: store, keys: s.keys}
	s.app.Get("/api/api-keys", h.list)
	s.app.Post("/api/api-keys", requireAdminTo("manage API keys"), s.Idempotent(h.create))
	s.app.Delete("/api/api-keys/:id", requireAdminTo("manage API keys"), h.revoke)
	s.app.Get("/api/partner-api/me", h.me)
}

type apiKeyHandlers struct {
	store APIKeyStore
	// keys is the server's key authenticator, told of a revocation when it caches keys.
	keys KeyAuthenticator
}

func (h apiKeyHandlers) list(c *fiber.Ctx) error {
	p, err := PageRequest(c)
	if err != nil {
		return err
	}
	keys, next, err := h.store.ListAPIKeys(c.UserContext(), Caller(c).CompanyID, p)
	if err != nil {
		return err
	}
	return c.JSON(page.List[identity.APIKey]{Data: nonNil(keys), NextCursor: next})
}

func (h apiKeyHandlers) create(c *fiber.Ctx) error {
	var in struct {
		Name      string `json:"name"`
		Kind      string `json:"kind"`
		ProgramID string `json:"program_id"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	in.Name = strings.TrimSpace(in.Name)
	if msg := freetext.Check(in.Name, 1, 100, false); msg != "" {
		return Invalid(FieldError{Field: "name", Message: msg})
	}
	var (
		key string
		rec identity.APIKey
		err error
	)
	switch in.Kind {
	case "", identity.KeySecret:
		if in.ProgramID != "" {
			return Invalid(FieldError{Field: "program_id", Message: "is only for a publishable key"})
		}
		key, rec, err = h.store.CreateAPIKey(c.UserContext(), Caller(c).CompanyID, in.Name)
	case identity.KeyPublishable:
		// A publishable key registers the tracking script's clicks of one of the
		// advertiser's programs (docs/integrations.md).
		if Caller(c).CompanyKind != identity.Advertiser {
			return NewProblem(fiber.StatusForbidden, "advertiser_only", "only advertisers make publishable keys, for their programs' tracking script")
		}
		if !ids.Valid(ids.Program, in.ProgramID) {
			return Invalid(FieldError{Field: "program_id", Message: "must be the id of one of your programs (prg_...)"})
		}
		key, rec, err = h.store.CreatePublishableKey(c.UserContext(), Caller(c).CompanyID, in.ProgramID, in.Name)
		if errors.Is(err, identity.ErrNotFound) {
			return Invalid(FieldError{Field: "program_id", Message: "must be the id of one of your programs (prg_...)"})
		}
	default:
		return Invalid(FieldError{Field: "kind", Message: "must be secret or publishable"})
	}
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(fiber.StatusCreated).JSON(createdAPIKey{APIKey: rec, Key: key})
}

func (h apiKeyHandlers) revoke(c *fiber.Ctx) error {
	id := c.Params("id")
	if !ids.Valid(ids.APIKey, id) {
		return errNoAPIKey
	}
	hash, err := h.store.RevokeAPIKey(c.UserContext(), Caller(c).CompanyID, id)
	if errors.Is(err, identity.ErrNotFound) {
		return errNoAPIKey
	}
	if err != nil {
		return err
	}
	if f, ok := h.keys.(forgetter); ok {
		f.Forget(hash)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

var errNoAPIKey = NewProblem(fiber.StatusNotFound, "not_found", "no such API key")

func (h apiKeyHandlers) me(c *fiber.Ctx) error {
	p := Caller(c)
	co, err := h.store.CompanyByID(c.UserContext(), p.CompanyID)
	if err != nil {
		return err
	}
	return c.JSON(partnerMe{Company: co, APIKeyID: p.KeyID})
}

type partnerMe struct {
	Company  identity.Company `json:"company"`
	APIKeyID string           `json:"api_key_id"`
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
