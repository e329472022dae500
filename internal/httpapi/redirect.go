package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/tracking"
)

// Clicker is what the click redirect needs; *tracking.Service is one.
type Clicker interface {
	Click(ctx context.Context, v tracking.Visit) (tracking.Redirect, error)
	Landing(ctx context.Context, code string) (string, error)
}

// Cookies of the redirect, first-party to the tracking domain.
const (
	// VisitorCookie identifies a browser across clicks, for duplicate detection. Its path
	// is /c/: nothing else on the domain needs it.
	VisitorCookie = "ps_vid"
	// ClickCookie holds the last click id, for conversion tracking served from the same
	// domain.
	ClickCookie = "ps_click"

	visitorCookieAge = 365 * 24 * time.Hour
	clickCookieAge   = 30 * 24 * time.Hour
)

var subParams = [5]string{"sub1", "sub2", "sub3", "sub4", "sub5"}

// mountRedirect adds GET (and HEAD) /c/{code}. It never answers a 500: an unknown or
// inactive link gets a small HTML page with 404, a lookup failure one with 503.
func (s *Server) mountRedirect(clicks Clicker, o TrackingOptions) {
	h := redirectHandlers{clicks: clicks, log: s.log, clients: s.clients,
		visitorCookie: newCookieHeader(VisitorCookie, "/c/", visitorCookieAge, o.SecureCookies),
		clickCookie:   newCookieHeader(ClickCookie, "/", clickCookieAge, o.SecureCookies)}
	s.app.Get(redirectRoute, h.redirect)
}

// redirectRoute is the click redirect's route template.
const redirectRoute = "/c/:code"

type redirectHandlers struct {
	clicks                     Clicker
	log                        *slog.Logger
	clients                    clientaddr.Trusted
	visitorCookie, clickCookie cookieHeader
}

// cookieHeader is a Set-Cookie value written once but for the cookie's value: the redirect
// sets two cookies per click, and fiber.Cookie formats every attribute on every call.
// TestPrebuiltCookiesMatchFiber holds it to fiber.Cookie's output.
type cookieHeader struct{ head, tail string }

func newCookieHeader(name, path string, maxAge time.Duration, secure bool) cookieHeader {
	tail := "; max-age=" + strconv.Itoa(int(maxAge.Seconds())) + "; path=" + path + "; HttpOnly"
	if secure {
		tail += "; secure"
	}
	return cookieHeader{head: name + "=", tail: tail + "; SameSite=Lax"}
}

// The redirect's header names and constant values as bytes, set without the
// normalization of fiber.Ctx.Set (the names are already canonical).
var (
	headerSetCookie    = []byte(fiber.HeaderSetCookie)
	headerLocation     = []byte(fiber.HeaderLocation)
	headerCacheControl = []byte(fiber.HeaderCacheControl)
	headerRobotsTag    = []byte("X-Robots-Tag")
	noStore            = []byte("no-store")
	noIndex            = []byte("noindex")
)

// setCookie adds the cookie h with value; the header copies the bytes, so they stay on the
// stack.
func setCookie[V string | []byte](c *fiber.Ctx, h cookieHeader, value V) {
	var buf [160]byte
	v := append(append(append(buf[:0], h.head...), value...), h.tail...)
	c.Response().Header.AddBytesKV(headerSetCookie, v)
}

func (h redirectHandlers) redirect(c *fiber.Ctx) error {
	hdr := &c.Response().Header
	hdr.SetCanonical(headerCacheControl, noStore)
	// Search engines must index the landing page, not the tracking URL.
	hdr.SetCanonical(headerRobotsTag, noIndex)
	// Fiber's strings point into a buffer reused after the handler: the Visit's may, since
	// the service copies what outlives Click.
	code := c.Params("code")
	if c.Method() == fiber.MethodHead {
		// Link checkers and previews probe with HEAD: answer where it goes, count nothing.
		landing, err := h.clicks.Landing(c.UserContext(), code)
		if err != nil {
			return h.redirectError(c, err)
		}
		return c.Redirect(landing, fiber.StatusFound)
	}
	v := tracking.Visit{
		Code:      code,
		IP:        clientIP(c, h.clients),
		UserAgent: c.Get(fiber.HeaderUserAgent),
		Referrer:  c.Get(fiber.HeaderReferer),
		VisitorID: c.Cookies(VisitorCookie),
	}
	for i, name := range subParams {
		v.Subs[i] = c.Query(name)
	}
	rd, err := h.clicks.Click(c.UserContext(), v)
	if err != nil {
		return h.redirectError(c, err)
	}
	if id, ok := rd.NewVisitorID(); ok {
		setCookie(c, h.visitorCookie, id[:])
	}
	setCookie(c, h.clickCookie, rd.Click.ClickID)
	var buf [512]byte
	hdr.SetCanonical(headerLocation, rd.AppendLocation(buf[:0]))
	c.Status(fiber.StatusFound)
	return nil
}

func (h redirectHandlers) redirectError(c *fiber.Ctx, err error) error {
	pages := unavailablePage
	status := fiber.StatusServiceUnavailable
	if errors.Is(err, tracking.ErrUnknownLink) {
		pages, status = notFoundPage, fiber.StatusNotFound
	} else {
		h.log.Error("click redirect: link lookup failed", "request_id", RequestID(c), "err", err)
		c.Set(fiber.HeaderRetryAfter, "5")
	}
	lang := c.AcceptsLanguages("en", "es")
	if lang == "" {
		lang = "en"
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderContentLanguage, lang)
	return c.Status(status).SendString(pages[lang])
}

// The pages are static: nothing from the request is echoed, so there is nothing to escape.
const pageTemplate = `<!doctype html>
<html lang="%s"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>%s</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:15vh auto;padding:0 1rem;color:#222;text-align:center}h1{font-size:1.4rem}p{color:#555}</style>
</head><body><h1>%s</h1><p>%s</p></body></html>
`

var (
	notFoundPage = map[string]string{
		"en": htmlPage("en", "Link not available", "This link is not available any more. It may have expired or been paused by its owner."),
		"es": htmlPage("es", "Enlace no disponible", "Este enlace ya no está disponible. Puede haber caducado o haber sido pausado por su propietario."),
	}
	unavailablePage = map[string]string{
		"en": htmlPage("en", "Please try again", "We could not open this link just now. Please try again in a few seconds."),
		"es": htmlPage("es", "Inténtalo de nuevo", "No hemos podido abrir este enlace ahora mismo. Vuelve a intentarlo en unos segundos."),
	}
)

func htmlPage(lang, title, text string) string {
	return fmt.Sprintf(pageTemplate, lang, title, title, text)
}
