package httpapi

import (
	"context"

	"github.com/gofiber/fiber/v2"
)

// AccountSettings changes the signed-in user's own settings.
type AccountSettings interface {
	// SetUserLocale saves the user's language (one of the dashboard's locales).
	SetUserLocale(ctx context.Context, userID, locale string) error
}

// accountLocales are the languages a user may choose: the dashboard's catalogues.
var accountLocales = map[string]bool{"en": true, "es": true}

// MountAccount adds the route that saves the signed-in user's language, remembered across
// devices by the dashboard's language switch.
func (s *Server) MountAccount(a AccountSettings) {
	h := accountHandlers{settings: a}
	s.app.Put("/api/account/locale", h.setLocale)
}

type accountHandlers struct{ settings AccountSettings }

func (h accountHandlers) setLocale(c *fiber.Ctx) error {
	var in struct {
		Locale string `json:"locale"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	if !accountLocales[in.Locale] {
		return Invalid(FieldError{Field: "locale", Message: "must be en or es"})
	}
	if err := h.settings.SetUserLocale(c.UserContext(), Caller(c).UserID, in.Locale); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"locale": in.Locale})
}
