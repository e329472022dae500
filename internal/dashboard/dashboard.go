// Package dashboard serves the web interface of brands and affiliates: page shells rendered
// from html/template with every string from the message catalogue (English and Spanish), and
// small JavaScript modules that fill them from the dashboard JSON API (/api/...). It holds no
// domain logic: what a page shows and allows is exactly what the API enforces.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/session"
	"github.com/partnerstream/partnerstream/internal/stats"
)

//go:embed templates/*.html
var templateFiles embed.FS

// SessionReader reads the dashboard session of a page request from its cookie;
// *session.Manager is one.
type SessionReader interface {
	Authenticate(c *fiber.Ctx) (session.Claims, error)
}

// Users reads the signed-in user and company, for the locale saved with the account and the
// header's "signed in as"; *identity.Store is one.
type Users interface {
	UserByID(ctx context.Context, id string) (identity.User, error)
	CompanyByID(ctx context.Context, id string) (identity.Company, error)
}

// Options of the dashboard.
type Options struct {
	Sessions SessionReader
	Users    Users
	// OAuthProviders are the social sign-in buttons to show ("google", "linkedin"): the
	// providers configured on the api.
	OAuthProviders []string
	// SecureCookies marks the language cookie Secure (an https base URL).
	SecureCookies bool
	Log           *slog.Logger
}

// localeCookie remembers the language of a visitor who is not signed in.
const localeCookie = "ps_locale"

type dashboard struct {
	o      Options
	cat    *catalogue
	pages  map[string]*template.Template // page name -> layout + page
	assets *assets
}

// Mount adds the dashboard routes to the api's app: "/" (redirect), "/login", "/app/..." and
// "/assets/...". They sit beside /api, /c/ and /postback without overlapping them. It panics
// if the embedded templates or catalogues are broken, which the package's tests rule out.
func Mount(app *fiber.App, o Options) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	d, err := newDashboard(o)
	if err != nil {
		panic(err)
	}
	app.Get("/", func(c *fiber.Ctx) error { return c.Redirect("/app", fiber.StatusFound) })
	app.Get("/login", d.login)
	app.Get("/app", d.app)
	app.Get("/app/*", d.app)
	app.Get("/assets/*", d.assets.serve)
	// Browsers ask for /favicon.ico whatever the page links; it is the same icon.
	app.Get("/favicon.ico", d.assets.favicon)
}

func newDashboard(o Options) (*dashboard, error) {
	cat, err := loadCatalogue(localeFiles)
	if err != nil {
		return nil, err
	}
	a, err := newAssets()
	if err != nil {
		return nil, err
	}
	d := &dashboard{o: o, cat: cat, pages: map[string]*template.Template{}, assets: a}
	// currencies are the choices of the currency lists: the API's own (money.ValidCurrency).
	funcs := template.FuncMap{"asset": a.url, "currencies": money.Currencies}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	for _, p := range append([]*page{loginPage}, pages...) {
		t, err := template.Must(layout.Clone()).ParseFS(templateFiles, "templates/"+p.Name+".html")
		if err != nil {
			return nil, err
		}
		d.pages[p.Name] = t
	}
	return d, nil
}

// page is one screen of the dashboard.
type page struct {
	Name string // template templates/<Name>.html and module /assets/js/pages/<Name>.js
	Path string
	// Kinds of company that see the page; empty means both.
	Kinds []string
	// Settings puts the page in the nav's settings section.
	Settings bool
	// Extra is page-specific data for its template (choices of a form).
	Extra map[string]any
}

func (p *page) Title() string { return "page." + p.Name + ".title" }

func (p *page) visibleTo(kind string) bool {
	if len(p.Kinds) == 0 {
		return true
	}
	for _, k := range p.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

var loginPage = &page{Name: "login", Path: "/login"}

// pages in the order of the navigation.
var pages = []*page{
	{Name: "overview", Path: "/app"},
	{Name: "traffic", Path: "/app/traffic", Extra: map[string]any{"Devices": trafficDevices, "Dimensions": trafficDimensions}},
	{Name: "programs", Path: "/app/programs", Extra: map[string]any{"Categories": programs.Categories, "Questions": questionNumbers()}},
	{Name: "partnerships", Path: "/app/partnerships", Extra: map[string]any{"Statuses": partnershipStatuses}},
	{Name: "links", Path: "/app/links"},
	{Name: "conversions", Path: "/app/conversions", Extra: map[string]any{"Statuses": commissionStatuses}},
	{Name: "review", Path: "/app/review", Kinds: []string{identity.Advertiser}, Extra: map[string]any{"Codes": fraud.Codes()}},
	{Name: "payouts", Path: "/app/payouts"},
	{Name: "profile", Path: "/app/settings/profile", Settings: true, Kinds: []string{identity.Affiliate}},
	{Name: "postbacks", Path: "/app/settings/postbacks", Settings: true},
	{Name: "integrations", Path: "/app/settings/integrations", Settings: true, Kinds: []string{identity.Advertiser}},
	{Name: "webhooks", Path: "/app/settings/webhooks", Settings: true, Extra: map[string]any{"Events": webhookEvents}},
	{Name: "apikeys", Path: "/app/settings/api-keys", Settings: true},
	{Name: "team", Path: "/app/settings/team", Settings: true},
	{Name: "rates", Path: "/app/settings/rates", Settings: true, Kinds: []string{identity.Advertiser}},
}

// The API's enumerations that forms offer (the API validates them).
var (
	commissionStatuses  = events.CommissionStatuses
	partnershipStatuses = []string{"pending", "approved", "rejected", "suspended"}
	webhookEvents       = events.Types
	// trafficDevices are the device types the traffic page filters by: the API's, but bots,
	// whose clicks the statistics leave out.
	trafficDevices = slices.DeleteFunc(slices.Clone(stats.Devices), func(d string) bool { return d == enrich.DeviceBot })
	// trafficDimensions are the groupings of the statistics API the traffic page tables, in
	// its order.
	trafficDimensions = []stats.GroupBy{stats.Country, stats.Device, stats.Browser, stats.OS, stats.Referrer, stats.UTMSource, stats.UTMCampaign}
)

// questionNumbers numbers the question fields of the program form, 1 to programs.MaxQuestions.
func questionNumbers() []int {
	n := make([]int, programs.MaxQuestions)
	for i := range n {
		n[i] = i + 1
	}
	return n
}

func pageAt(path string) *page {
	path = strings.TrimSuffix(path, "/")
	for _, p := range pages {
		if p.Path == path {
			return p
		}
	}
	return nil
}

// view is what a page template renders.
type view struct {
	translator
	Page      *page
	Extra     map[string]any
	Nav       []*page
	Languages []langLink
	Boot      boot
	// Providers are the social sign-in buttons (login page).
	Providers []string
	// Who is signed in, for the header; nil on the login page.
	Who *signedIn
}

// signedIn is the header's "signed in as": the user's name (its e-mail when it has none),
// its company's name and its role there. Either name is empty when it could not be read.
type signedIn struct {
	User, Company, Role string
}

// langLink is one entry of the language switch.
type langLink struct {
	Code, Name, Href string
	Current          bool
}

// boot is the page's data island for its JavaScript.
type boot struct {
	Locale   string            `json:"locale"`
	Page     string            `json:"page"`
	Kind     string            `json:"kind,omitempty"`
	Role     string            `json:"role,omitempty"`
	Next     string            `json:"next,omitempty"`
	Messages map[string]string `json:"messages"`
}

// login renders the sign-in page; a signed-in visitor goes on to the app.
func (d *dashboard) login(c *fiber.Ctx) error {
	if _, err := d.o.Sessions.Authenticate(c); err == nil {
		return c.Redirect(safeNext(c.Query("next")), fiber.StatusFound)
	}
	locale := d.locale(c, "")
	v := d.view(c, loginPage, locale, session.Claims{})
	v.Providers = d.o.OAuthProviders
	v.Boot.Next = safeNext(c.Query("next"))
	return d.render(c, v)
}

// app renders a page of the signed-in dashboard. Without a valid session the visitor is sent
// to the login page, which also renews an expired access token with the refresh cookie (that
// cookie only travels to /api/auth) and comes back.
func (d *dashboard) app(c *fiber.Ctx) error {
	p := pageAt(c.Path())
	claims, err := d.o.Sessions.Authenticate(c)
	if err != nil {
		if !isSignedOut(err) {
			d.o.Log.Error("dashboard: reading the session", "err", err)
		}
		return c.Redirect("/login?next="+url.QueryEscape(c.OriginalURL()), fiber.StatusFound)
	}
	if p == nil || !p.visibleTo(claims.CompanyKind) {
		return fiber.ErrNotFound
	}
	saved := claims.Locale
	who := &signedIn{Role: claims.Role}
	if u, err := d.o.Users.UserByID(c.UserContext(), claims.UserID); err == nil {
		saved = u.Locale
		who.User = u.Name
		if who.User == "" {
			who.User = u.Email
		}
	} else {
		d.o.Log.Warn("dashboard: reading the user's locale", "err", err)
	}
	if co, err := d.o.Users.CompanyByID(c.UserContext(), claims.CompanyID); err == nil {
		who.Company = co.Name
	} else {
		d.o.Log.Warn("dashboard: reading the user's company", "err", err)
	}
	v := d.view(c, p, d.locale(c, saved), claims)
	v.Who = who
	return d.render(c, v)
}

func isSignedOut(err error) bool {
	for _, e := range []error{session.ErrNoCredentials, session.ErrInvalidToken, session.ErrExpired, session.ErrRevoked, session.ErrAPIKeyNotAllowed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// locale picks the page's language: an explicit ?lang= (the language switch, remembered in
// a cookie), else the user's saved locale, else the cookie, else Accept-Language, else
// English.
func (d *dashboard) locale(c *fiber.Ctx, saved string) string {
	if l := c.Query("lang"); supported(l) {
		c.Cookie(&fiber.Cookie{Name: localeCookie, Value: l, Path: "/", MaxAge: 365 * 24 * 3600,
			Secure: d.o.SecureCookies, SameSite: fiber.CookieSameSiteLaxMode})
		return l
	}
	if supported(saved) {
		return saved
	}
	if l := c.Cookies(localeCookie); supported(l) {
		return l
	}
	if l := d.cat.match(c.Get(fiber.HeaderAcceptLanguage)); l != "" {
		return l
	}
	return Locales[0]
}

func (d *dashboard) view(c *fiber.Ctx, p *page, locale string, cl session.Claims) view {
	v := view{translator: d.cat.translator(locale), Page: p, Extra: p.Extra,
		Boot: boot{Locale: locale, Page: p.Name, Kind: cl.CompanyKind, Role: cl.Role}}
	v.Boot.Messages = v.messages()
	if cl.CompanyKind != "" {
		for _, q := range pages {
			if q.visibleTo(cl.CompanyKind) {
				v.Nav = append(v.Nav, q)
			}
		}
	}
	q := url.Values{}
	for k, vals := range c.Queries() {
		if k != "lang" {
			q.Set(k, vals)
		}
	}
	for _, l := range Locales {
		q.Set("lang", l)
		v.Languages = append(v.Languages, langLink{Code: l, Name: languageNames[l], Href: p.Path + "?" + q.Encode(), Current: l == locale})
	}
	return v
}

// contentSecurityPolicy allows only the platform's own scripts, styles and API.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

func (d *dashboard) render(c *fiber.Ctx, v view) error {
	var b strings.Builder
	if err := d.pages[v.Page.Name].ExecuteTemplate(&b, "layout.html", v); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentSecurityPolicy, contentSecurityPolicy)
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "same-origin")
	c.Set(fiber.HeaderContentLanguage, v.locale)
	c.Set(fiber.HeaderVary, "Cookie, Accept-Language")
	return c.SendString(b.String())
}

// safeNext keeps a post-sign-in destination on this site, inside the app.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/app") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return "/app"
}
