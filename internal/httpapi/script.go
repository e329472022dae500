package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/tracking"
	"github.com/partnerstream/partnerstream/internal/trackscript"
)

// ScriptService is what the tracking script needs (*trackscript.Service).
type ScriptService interface {
	Settings(ctx context.Context, advertiserID, programID string) (trackscript.Settings, error)
	SetSettings(ctx context.Context, advertiserID, programID string, in trackscript.Settings) (trackscript.Settings, error)
	ForKey(ctx context.Context, key string) (trackscript.Settings, error)
	Click(ctx context.Context, key, origin string, v tracking.Visit, admit func(keyID string) error) (trackscript.Click, error)
}

// MountScript adds the tracking script (/t.js), the public endpoint its clicks go to, and the
// dashboard routes of a program's script settings.
func (s *Server) MountScript(svc ScriptService) {
	h := scriptHandlers{server: s, svc: svc}
	s.app.Get("/t.js", h.script)
	s.Public(fiber.MethodPost, "/api/script/clicks", h.click)
	const settings = "/api/programs/:id/tracking-script"
	s.app.Get(settings, advertiserOnly, h.settings)
	s.app.Put(settings, advertiserOnly, requireAdminTo("change the tracking script"), h.setSettings)
}

type scriptHandlers struct {
	// server throttles addresses that send wrong keys, decides client addresses and keeps
	// the budgets of the script's clicks.
	server *Server
	svc    ScriptService
}

// script serves the script configured for ?key=. An unknown key gets a script that does
// nothing but set window.partnerstream, so a page with a wrong key shows no error.
func (h scriptHandlers) script(c *fiber.Ctx) error {
	key := c.Query("key")
	var st *trackscript.Settings
	if got, err := h.svc.ForKey(c.UserContext(), key); err == nil {
		st = &got
	} else if !errors.Is(err, trackscript.ErrUnknownKey) && !errors.Is(err, trackscript.ErrNotFound) {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/javascript; charset=utf-8")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	// Settings reach pages within five minutes; a browser does not ask on every page view.
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.Send(trackscript.Script(key, st))
}

// scriptClick is the body the script posts, as text/plain (no preflight).
type scriptClick struct {
	Key       string    `json:"key"`
	Code      string    `json:"code"`
	URL       string    `json:"url"`
	Referrer  string    `json:"referrer"`
	VisitorID string    `json:"visitor_id"`
	Subs      [5]string `json:"subs"`
}

func (h scriptHandlers) click(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Vary(fiber.HeaderOrigin)
	var in scriptClick
	dec := json.NewDecoder(bytes.NewReader(c.Body()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return NewProblem(fiber.StatusBadRequest, "invalid_json", describeJSONError(err))
	}
	if in.Code == "" {
		return Invalid(FieldError{Field: "code", Message: "is required: the partner's code from the page's query"})
	}
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" {
		return NewProblem(fiber.StatusForbidden, "origin_not_allowed", "the Origin header is required: clicks come from the program's own pages")
	}
	v := tracking.Visit{Code: in.Code, IP: clientIP(c, h.server.clients), UserAgent: c.Get(fiber.HeaderUserAgent),
		Referrer: in.Referrer, VisitorID: in.VisitorID, Subs: in.Subs, Landing: in.URL}
	// The budgets are taken once the key and the origin are known to be good: a wrong key
	// spends nobody's budget (it counts against its address instead), and the address's
	// budget comes first, so that one address past its own spends none of the key's.
	admit := func(keyID string) error {
		err := allowEach(c, budget{h.server.scriptAddressLimiter, keyID + " " + subscriber(v.IP)},
			budget{h.server.scriptLimiter, keyID})
		if err != nil {
			// The page may read its refusal: the script then ends quietly, without the
			// browser's CORS error.
			c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
		}
		return err
	}
	var click trackscript.Click
	err := h.server.credential(c, func(c *fiber.Ctx) (err error) {
		click, err = h.svc.Click(c.UserContext(), in.Key, origin, v, admit)
		if errors.Is(err, trackscript.ErrUnknownKey) {
			return NewProblem(fiber.StatusUnauthorized, "invalid_publishable_key", "key must be an active publishable key (ps_pk_...) of the program")
		}
		return err
	})
	switch {
	case errors.Is(err, trackscript.ErrOriginNotAllowed):
		return NewProblem(fiber.StatusForbidden, "origin_not_allowed", "the page's origin is not one of the program's tracking script origins")
	case errors.Is(err, trackscript.ErrUnknownCode):
		return NewProblem(fiber.StatusNotFound, "unknown_code", "no active link of the key's program has this code")
	case errors.Is(err, tracking.ErrUnavailable):
		c.Set(fiber.HeaderRetryAfter, "5")
		return NewProblem(fiber.StatusServiceUnavailable, "unavailable", "the link could not be looked up: retry shortly")
	case err != nil:
		return err
	}
	// Only the program's own pages may read the answer.
	c.Set(fiber.HeaderAccessControlAllowOrigin, click.Origin)
	return c.JSON(fiber.Map{"click_id": click.ClickID, "visitor_id": nullable(click.VisitorID)})
}

type scriptSettingsJSON struct {
	ProgramID  string   `json:"program_id"`
	Origins    []string `json:"origins"`
	Params     []string `json:"params"`
	Model      string   `json:"model"`
	WindowDays int      `json:"cookie_days"`
}

func scriptSettingsOf(st trackscript.Settings) scriptSettingsJSON {
	return scriptSettingsJSON{ProgramID: st.ProgramID, Origins: nonNil(st.Origins), Params: st.Params, Model: st.Model, WindowDays: st.WindowDays}
}

func (h scriptHandlers) settings(c *fiber.Ctx) error {
	st, err := h.svc.Settings(c.UserContext(), Caller(c).CompanyID, c.Params("id"))
	if err != nil {
		return scriptProblem(err)
	}
	return c.JSON(scriptSettingsOf(st))
}

func (h scriptHandlers) setSettings(c *fiber.Ctx) error {
	var body struct {
		Origins []string `json:"origins"`
		Params  []string `json:"params"`
		Model   string   `json:"model"`
	}
	if err := DecodeJSON(c, &body); err != nil {
		return err
	}
	st, err := h.svc.SetSettings(c.UserContext(), Caller(c).CompanyID, c.Params("id"),
		trackscript.Settings{Origins: body.Origins, Params: body.Params, Model: body.Model})
	if err != nil {
		return scriptProblem(err)
	}
	return c.JSON(scriptSettingsOf(st))
}

func scriptProblem(err error) error {
	var inv *trackscript.InvalidError
	switch {
	case errors.As(err, &inv):
		return Invalid(FieldError{Field: inv.Field, Message: inv.Message})
	case errors.Is(err, trackscript.ErrNotFound):
		return NewProblem(fiber.StatusNotFound, "not_found", "no such program of yours")
	}
	return err
}
