package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// chromiumPath is Debian's Chromium (hack/deps.sh installs it).
const chromiumPath = "/usr/bin/chromium"

// envScreenshots names the directory where the browser tests write a PNG of every page in
// every language (make screenshots).
const envScreenshots = "PARTNERSTREAM_SCREENSHOTS"

// browser is one Chromium tab with its own cookies, speaking lang, that records the page's
// JavaScript errors.
type browser struct {
	ctx    context.Context
	t      *testing.T
	base   string
	lang   string
	mu     sync.Mutex
	errors []string
	// context is the tab's browser context: its cookies, storage and downloads.
	context cdp.BrowserContextID
}

// chromiums are the Chromium processes of the package's tests, one per set of command-line
// flags (language and window size), started on first use and stopped by TestMain: each test
// gets a tab in a browser context of its own (cookies, storage and cache of its own), as a
// fresh Chromium would give it, without waiting for one to start.
var chromiums struct {
	mu    sync.Mutex
	roots map[string]context.Context
	stops []func()
}

// chromium returns the context of the first tab of the Chromium with these flags.
func chromium(t *testing.T, lang string, width, height int) context.Context {
	t.Helper()
	chromiums.mu.Lock()
	defer chromiums.mu.Unlock()
	key := fmt.Sprintf("%s %dx%d", lang, width, height)
	if root, ok := chromiums.roots[key]; ok {
		return root
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(width, height), chromedp.Flag("lang", lang),
		// Chromium starts slowly on a 2-core CI machine busy with other test packages; the
		// default 20 s wait for its DevTools address is not always enough there.
		chromedp.WSURLReadTimeout(2*time.Minute))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	root, cancel := chromedp.NewContext(actx)
	if err := chromedp.Run(root); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start %s (%s): %v", chromiumPath, key, err)
	}
	if chromiums.roots == nil {
		chromiums.roots = map[string]context.Context{}
	}
	chromiums.roots[key] = root
	chromiums.stops = append(chromiums.stops, func() { cancel(); cancelAlloc() })
	return root
}

// stopChromiums stops every Chromium the tests started.
func stopChromiums() {
	chromiums.mu.Lock()
	defer chromiums.mu.Unlock()
	for _, stop := range chromiums.stops {
		stop()
	}
	chromiums.roots, chromiums.stops = nil, nil
}

func newBrowser(t *testing.T, base, lang string, width, height int) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: run hack/deps.sh (CI must not skip the browser tests)", chromiumPath)
		}
		t.Skipf("%s is missing: run hack/deps.sh", chromiumPath)
	}
	root := chromium(t, lang, width, height)
	// A new window of a new browser context: the window takes the size of the command line's,
	// and the context is the tab's alone.
	var id target.ID
	var bctx cdp.BrowserContextID
	if err := chromedp.Run(root, chromedp.ActionFunc(func(ctx context.Context) error {
		browser := cdp.WithExecutor(ctx, chromedp.FromContext(ctx).Browser)
		var err error
		if bctx, err = target.CreateBrowserContext().Do(browser); err != nil {
			return fmt.Errorf("create a browser context: %w", err)
		}
		if id, err = target.CreateTarget("about:blank").WithBrowserContextID(bctx).WithNewWindow(true).Do(browser); err != nil {
			return fmt.Errorf("open a tab: %w", err)
		}
		return nil
	})); err != nil {
		t.Fatalf("browser (%s): %v", lang, err)
	}
	tab, closeTab := chromedp.NewContext(root, chromedp.WithTargetID(id))
	ctx, cancelTimeout := context.WithTimeout(tab, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		closeTab()
		// Its cookies and storage go with it (chromedp closes a tab it attached to, but leaves
		// the context it did not create).
		_ = chromedp.Run(root, chromedp.ActionFunc(func(ctx context.Context) error {
			return target.DisposeBrowserContext(bctx).Do(cdp.WithExecutor(ctx, chromedp.FromContext(ctx).Browser))
		}))
	})
	b := &browser{ctx: ctx, t: t, base: base, lang: lang, context: bctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.record(ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.record(strings.Join(parts, " "))
			}
		case *page.EventJavascriptDialogOpening:
			// The dashboard asks before destroying things; the journeys say yes.
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	accept := map[string]string{"en": "en-US,en;q=0.9", "es": "es-ES,es;q=0.9"}[lang]
	b.run(network.Enable(), network.SetExtraHTTPHeaders(network.Headers{"Accept-Language": accept}),
		emulation.SetLocaleOverride().WithLocale(lang), emulation.SetTimezoneOverride("UTC"))
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("JavaScript error in the page: %s", e)
		}
	})
	return b
}

func (b *browser) record(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, msg)
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser (%s): %v", b.lang, err)
	}
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base+path), chromedp.WaitReady("body", chromedp.ByQuery))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.run(chromedp.Text(sel, &s, chromedp.ByQuery))
	return strings.TrimSpace(s)
}

func (b *browser) eval(js string, out any) {
	b.t.Helper()
	b.run(chromedp.Evaluate(js, out))
}

// waitFor polls a JavaScript condition until it holds.
func (b *browser) waitFor(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The page may be navigating: an error or a missing document is "not yet".
		var ok bool
		err := chromedp.Run(b.ctx, chromedp.Evaluate("(() => { try { return !!("+js+") } catch { return false } })()", &ok))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var flash string
			b.eval(`(document.getElementById('flash')||{}).textContent||''`, &flash)
			b.t.Fatalf("browser (%s): waiting for %s: gave up (flash: %q)", b.lang, what, flash)
		}
		// An evaluation costs the page little; most conditions hold within a few polls.
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) path() string {
	var loc string
	b.eval(`location.pathname`, &loc)
	return loc
}

// screenshot writes a PNG of the whole page when make screenshots asked for them.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv(envScreenshots)
	if dir == "" {
		return
	}
	var png []byte
	var ignored bool
	b.eval(`(document.activeElement && document.activeElement.blur(), window.scrollTo(0, 0), true)`, &ignored)
	// The whole page, not the window: the parts below the fold (histories, forms) are shown too.
	b.run(chromedp.FullScreenshot(&png, 100))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-"+b.lang+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// words are the strings a journey checks, per language, straight from the catalogues'
// meaning (not their ids), so a page showing the wrong language fails.
var words = map[string]map[string]string{
	"en": {"login": "Sign in", "overview": "Overview", "apikeys": "API keys", "created": "created", "conversions": "Conversions & commissions",
		"revoke": "Revoke", "revoked": "revoked"},
	"es": {"login": "Iniciar sesión", "overview": "Resumen", "apikeys": "Claves de API", "created": "creada", "conversions": "Conversiones y comisiones",
		"revoke": "Revocar", "revoked": "revocada"},
}

var codePattern = regexp.MustCompile(`\b[0-9]{6}\b`)

// signUp walks the sign-up with a magic code read from the SMTP listener and lands on the
// overview.
func (b *browser) signUp(s *stack, email, kind, company string) {
	b.t.Helper()
	b.open("/app")
	if p := b.path(); p != "/login" {
		b.t.Fatalf("a visitor without a session is at %s, want /login", p)
	}
	if got := b.text("h1"); got != words[b.lang]["login"] {
		b.t.Fatalf("login heading %q, want %q (Accept-Language %s)", got, words[b.lang]["login"], b.lang)
	}
	b.screenshot("login")
	b.run(chromedp.Click("#to-signup", chromedp.ByQuery),
		chromedp.SendKeys("#email", email, chromedp.ByQuery),
		chromedp.Click(`input[name=company_kind][value=`+kind+`]`, chromedp.ByQuery),
		chromedp.SendKeys("#company_name", company, chromedp.ByQuery),
		chromedp.Click(`#request-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible("#code", chromedp.ByQuery))
	b.enterCode(s, email)
	b.waitFor("the overview after sign-in", `location.pathname === '/app' && document.querySelector('#chart-clicks svg')`)
	if got := b.text("h1"); got != words[b.lang]["overview"] {
		b.t.Fatalf("overview heading %q, want %q", got, words[b.lang]["overview"])
	}
}

// enterCode reads the sign-in code sent to email from the SMTP listener and submits it.
func (b *browser) enterCode(s *stack, email string) {
	b.t.Helper()
	msg := s.inbox.Wait(b.t, email, 10*time.Second)
	code := codePattern.FindString(msg.Text)
	if code == "" {
		b.t.Fatalf("no code in the e-mail: %q", msg.Text)
	}
	b.run(chromedp.SendKeys("#code", code, chromedp.ByQuery), chromedp.Click(`#verify-form button[type=submit]`, chromedp.ByQuery))
}

// waitForChart reloads the overview until the conversions chart shows the totals (the
// figures reach ClickHouse through Kafka and ingest, within a second or so).
func (b *browser) waitForChart(kv ...any) {
	b.t.Helper()
	cond := []string{}
	for i := 0; i < len(kv); i += 2 {
		name := kv[i].(string)
		cond = append(cond, fmt.Sprintf(`p.dataset.total%s === '%d'`, strings.ToUpper(name[:1])+name[1:], kv[i+1].(int)))
	}
	js := `(p => p && ` + strings.Join(cond, " && ") + `)(document.querySelector('#chart-conversions .plot[data-total-pending]'))`
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.open("/app")
		b.waitFor("the conversions chart", `document.querySelector('#chart-conversions svg')`)
		var ok bool
		b.eval(js, &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var got string
			b.eval(`JSON.stringify(document.querySelector('#chart-conversions .plot').dataset)`, &got)
			b.t.Fatalf("the conversions chart shows %s, want %v", got, kv)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// createAPIKey creates a key on Settings > API keys and returns the secret shown once.
func (b *browser) createAPIKey(name string) string {
	b.t.Helper()
	b.open("/app/settings/api-keys")
	b.waitFor("the key list", `document.querySelector('#keys .empty, #keys table')`)
	b.run(chromedp.SendKeys("#key-name", name, chromedp.ByQuery), chromedp.Click(`#create-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible("#new-key", chromedp.ByQuery))
	var key string
	b.run(chromedp.Value("#new-key-value", &key, chromedp.ByQuery))
	b.waitFor("the new key in the list", fmt.Sprintf(`[...document.querySelectorAll('#keys td')].some(td => td.textContent === %q)`, name))
	if flash := b.text("#flash"); !strings.Contains(flash, words[b.lang]["created"]) {
		b.t.Fatalf("flash %q does not say the key was %s", flash, words[b.lang]["created"])
	}
	return key
}

func TestBrowserJourneys(t *testing.T) {
	s := newStack(t, stackOptions{})
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			b := newBrowser(t, s.base, lang, 1280, 900)
			adv := "brand-" + lang + "@example.test"
			b.signUp(s, adv, "advertiser", "Brand "+lang)
			if var_ := b.text("html"); var_ == "" {
				t.Fatal("empty page")
			}
			var htmlLang string
			b.eval(`document.documentElement.lang`, &htmlLang)
			if htmlLang != lang {
				t.Fatalf("html lang %q, want %q", htmlLang, lang)
			}
			b.screenshot("overview")

			key := b.createAPIKey("server " + lang)
			b.screenshot("apikeys")
			if status, body := s.call(t, "GET", "/api/partner-api/me", key, ""); status != 200 || !strings.Contains(body, "Brand "+lang) {
				t.Fatalf("the new key on /api/partner-api/me: %d %s", status, body)
			}

			// A conversion registered with that key shows as pending on the overview; approving
			// its commission on the conversions page moves it to approved on the chart.
			clickID := s.trafficFor(t, adv, "aff-"+lang+"@example.test")
			order := "order-" + lang
			s.eventually(t, "the conversion is registered", func() (bool, string) {
				status, body := s.call(t, "POST", "/api/v1/conversions", key, `{"click_id":"`+clickID+`","external_id":"`+order+`","amount":"120.00"}`)
				return status == 201 || status == 200, fmt.Sprintf("%d %s", status, body)
			})
			b.waitForChart("pending", 1, "approved", 0)
			b.screenshot("overview")

			b.open("/app/conversions")
			b.waitFor("the conversion in the list", `document.querySelector('#conversions tbody tr')`)
			if got := b.text("h1"); got != words[lang]["conversions"] {
				t.Fatalf("conversions heading %q, want %q", got, words[lang]["conversions"])
			}
			b.screenshot("conversions")
			b.run(chromedp.Click(`#conversions tbody tr button:not(.danger)`, chromedp.ByQuery))
			b.waitFor("the approval", `document.querySelector('#conversions .badge.approved')`)
			b.checkExports(order)
			b.waitForChart("pending", 0, "approved", 1)

			// A revoked key stops working at once.
			b.open("/app/settings/api-keys")
			b.clickRow("#keys", "server "+lang, words[lang]["revoke"])
			b.flashSays(words[lang]["revoked"])
			b.waitFor("the key gone from the list", fmt.Sprintf(`![...document.querySelectorAll('#keys td')].some(td => td.textContent === %q)`, "server "+lang))
			if status, body := s.call(t, "GET", "/api/partner-api/me", key, ""); status != 401 {
				t.Fatalf("the revoked key on /api/partner-api/me: %d %s", status, body)
			}

			// The language switch saves the choice with the account.
			other := map[string]string{"en": "es", "es": "en"}[lang]
			b.open("/app")
			b.run(chromedp.Click(`.langs a[data-locale="`+other+`"]`, chromedp.ByQuery))
			// The new document must have finished loading: reading it while it still loads can
			// find a node that is gone by the time its text is asked for.
			b.waitFor("the page in the other language", `document.documentElement.lang === '`+other+`' && document.readyState === 'complete'`)
			if got := b.text("h1"); got != words[other]["overview"] {
				t.Fatalf("after switching to %s the heading is %q", other, got)
			}
			u, err := s.ids.UserByEmail(context.Background(), adv)
			if err != nil {
				t.Fatal(err)
			}
			if u.Locale != other {
				t.Fatalf("saved locale %q, want %q", u.Locale, other)
			}
			b.open("/app/conversions")
			if got := b.text("h1"); got != words[other]["conversions"] {
				t.Fatalf("the saved language does not stick: heading %q", got)
			}

			// Every page fits a phone (360 px) without scrolling sideways.
			b.fitsPhone(360, 740, "/app", "/app/programs", "/app/partnerships", "/app/links", "/app/conversions", "/app/payouts",
				"/app/settings/postbacks", "/app/settings/webhooks", "/app/settings/api-keys")
		})
	}
}

// fill types into a form field after clearing it.
// checkExports downloads the conversion list's CSV with the link on the page (after
// choosing a filter, which the link must follow), then the payouts' and the overview's.
func (b *browser) checkExports(order string) {
	b.t.Helper()
	dir := b.t.TempDir()
	b.run(cdpbrowser.SetDownloadBehavior(cdpbrowser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(dir).WithBrowserContextID(b.context))
	b.run(chromedp.SetValue("#f-status", "approved", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('filter-form').dispatchEvent(new Event('change')), true`, nil))
	var href string
	b.eval(`document.getElementById('export').href`, &href)
	if !strings.HasSuffix(href, "/api/conversions.csv?status=approved") {
		b.t.Fatalf("the download link is %q, want the export with status=approved", href)
	}
	b.click("#export")
	file := filepath.Join(dir, "conversions.csv")
	deadline := time.Now().Add(20 * time.Second)
	var body []byte
	for {
		var err error
		if body, err = os.ReadFile(file); err == nil && len(body) > 0 {
			break
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("no %s downloaded: %v", file, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if !strings.HasPrefix(lines[0], "id,occurred_at,") || len(lines) != 2 || !strings.Contains(lines[1], ","+order+",sale,120.00,") ||
		!strings.Contains(lines[1], ",approved,") {
		b.t.Fatalf("the downloaded conversions: %q", body)
	}
	for page, header := range map[string]string{"/app/payouts": "payee_email,amount,currency,reference,payee_name,", "/app": "day,currency,clicks,"} {
		b.open(page)
		b.waitFor("the download link", `document.getElementById('export')`)
		var got string
		b.run(chromedp.Evaluate(`fetch(document.getElementById('export').href).then(async r => r.status + ' ' + r.headers.get('content-type') + '\n' + await r.text())`, &got,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
		if !strings.HasPrefix(got, "200 text/csv; charset=utf-8\n"+header) {
			b.t.Fatalf("the download of %s: %q", page, got)
		}
	}
}

func (b *browser) fill(sel, value string) {
	b.t.Helper()
	b.waitFor("the field "+sel, fmt.Sprintf(`document.querySelector(%q)`, sel))
	var ignored bool
	b.eval(fmt.Sprintf(`(document.querySelector(%q).value = '', true)`, sel), &ignored)
	b.run(chromedp.SendKeys(sel, value, chromedp.ByQuery))
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.run(chromedp.Click(sel, chromedp.ByQuery))
}

// clickRow clicks the button labelled label in the first table row containing text.
func (b *browser) clickRow(container, text, label string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const row = [...document.querySelectorAll('%s tbody tr')].find(r => r.textContent.includes(%q));
		const btn = row && [...row.querySelectorAll('button')].find(x => x.textContent.trim() === %q);
		if (btn) btn.click(); return !!btn; })()`, container, text, label)
	b.waitFor(fmt.Sprintf("a %q button in a row with %q", label, text), js)
}

// rowControl clicks the control matching sel in the first table row containing text.
func (b *browser) rowControl(container, text, sel string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const row = [...document.querySelectorAll('%s tbody tr')].find(r => r.textContent.includes(%q));
		const el = row && row.querySelector(%q);
		if (el) el.click(); return !!el; })()`, container, text, sel)
	b.waitFor(fmt.Sprintf("%s in a row with %q", sel, text), js)
}

func (b *browser) flashSays(what string) {
	b.t.Helper()
	b.waitFor("the message "+what, fmt.Sprintf(`document.getElementById('flash').textContent.includes(%q)`, what))
}

// partnerWords are the labels the partner journey clicks, per language.
var partnerWords = map[string]map[string]string{
	"en": {"apply": "Apply", "approve": "Approve", "reject": "Reject", "mark_paid": "Mark paid", "mark_failed": "Mark failed", "cancel": "Cancel payout",
		"promotions": "Promotions", "edit": "Edit", "promotion_saved": "Promotion saved.", "pause": "Pause", "resume": "Resume",
		"bulk_approved": "2 commissions approved.", "bulk_rejected": "2 commissions rejected.",
		"recurring": "for 12 months", "coupons": "Coupon codes", "code_added": "Code POD-en added.", "by_coupon": "Coupon code", "by_click": "Click"},
	"es": {"apply": "Solicitar", "approve": "Aprobar", "reject": "Rechazar", "mark_paid": "Marcar como pagado", "mark_failed": "Marcar como fallido", "cancel": "Cancelar pago",
		"promotions": "Promociones", "edit": "Editar", "promotion_saved": "Promoción guardada.", "pause": "Pausar", "resume": "Reanudar",
		"bulk_approved": "2 comisiones aprobadas.", "bulk_rejected": "2 comisiones rechazadas.",
		"recurring": "durante 12 meses", "coupons": "Códigos de cupón", "code_added": "Código POD-es añadido.", "by_coupon": "Código de cupón", "by_click": "Clic"},
}

// TestBrowserPartnerJourney walks a brand and an affiliate through the rest of the
// dashboard: a program made in the browser, an application approved, a tracking link, a
// commission approved and paid out, and the postback settings.
func TestBrowserPartnerJourney(t *testing.T) {
	s := newStack(t, stackOptions{})
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			w := partnerWords[lang]
			adv := newBrowser(t, s.base, lang, 1280, 900)
			adv.signUp(s, "shop-"+lang+"@example.test", "advertiser", "Shop "+lang)
			aff := newBrowser(t, s.base, lang, 1280, 900)
			aff.signUp(s, "blog-"+lang+"@example.test", "affiliate", "Blog "+lang)

			// The affiliate sets a postback URL (and rotates its secret) before any commission
			// changes, so the log at the end has deliveries.
			receiver := newReceiver(t)
			aff.open("/app/settings/postbacks")
			aff.waitFor("the postback settings", `document.getElementById('pb-secret-info').textContent !== ''`)
			aff.fill("#pb-url", receiver.url+"/postback")
			aff.click(`#postback-form button[type=submit]`)
			aff.waitFor("the postback secret, shown once", `document.getElementById('pb-secret-value').value.startsWith('whsec_')`)
			var first string
			aff.eval(`document.getElementById('pb-secret-value').value`, &first)
			aff.click("#pb-rotate")
			aff.waitFor("a new postback secret", fmt.Sprintf(`document.getElementById('pb-secret-value').value.startsWith('whsec_') && document.getElementById('pb-secret-value').value !== %q`, first))
			aff.waitFor("the empty delivery log", `document.querySelector('#pb-deliveries .empty')`)

			program := "Sneakers " + lang
			adv.open("/app/programs")
			adv.waitFor("the program list", `document.querySelector('#programs .empty, #programs table')`)
			adv.fill("#p-name", program)
			adv.fill("#p-landing", "https://shop.example/")
			adv.fill("#p-value", "7.50")
			// A subscription program: renewals earn for 12 months, a customer stays 400 days.
			// Invitation-only: out of the directory, which the form ticks for a new program.
			var ignored bool
			adv.eval(`(document.getElementById('p-recurring').value = 'months', document.getElementById('p-recurring').dispatchEvent(new Event('change')),
				document.getElementById('p-attribution-rule').value = 'last_click', document.getElementById('p-listed').checked = false, true)`, &ignored)
			adv.fill("#p-recurring-months", "12")
			adv.fill("#p-customer-window", "400")
			adv.click(`#program-form button[type=submit]`)
			adv.waitFor("the new program, recurring", fmt.Sprintf(`(t => t.includes(%q) && t.includes(%q))(document.querySelector('#programs').textContent)`, program, w["recurring"]))
			adv.clickRow("#programs", program, w["edit"])
			adv.waitFor("the recurring rule and customer window back in the form", `document.getElementById('p-recurring').value === 'months'
				&& document.getElementById('p-recurring-months').value === '12' && document.getElementById('p-customer-window').value === '400'
				&& document.getElementById('p-attribution-rule').value === 'last_click'`)
			adv.click("#program-cancel")

			// A promotion is added to the program, then edited: the form comes back filled,
			// with the keyboard on its first field.
			adv.clickRow("#programs", program, w["promotions"])
			adv.waitFor("the promotions", `document.querySelector('#promotions .empty, #promotions table')`)
			adv.fill("#pr-title", "Spring sale")
			adv.fill("#pr-coupon", "SPRING")
			adv.click(`#promotion-form button[type=submit]`)
			adv.waitFor("the new promotion", `document.querySelector('#promotions').textContent.includes('Spring sale')`)
			adv.clickRow("#promotions", "Spring sale", w["edit"])
			adv.waitFor("the promotion in the form, focused", `document.activeElement.id === 'pr-title' && document.getElementById('pr-coupon').value === 'SPRING'`)
			adv.fill("#pr-title", "Summer sale")
			adv.click(`#promotion-form button[type=submit]`)
			adv.flashSays(w["promotion_saved"])
			adv.waitFor("the edited promotion", `(t => t.includes('Summer sale') && t.includes('SPRING') && !t.includes('Spring sale'))(document.querySelector('#promotions').textContent)`)
			if n := adv.count(`#promotions tbody tr`); n != 1 {
				t.Fatalf("editing a promotion left %d promotions, want 1", n)
			}
			adv.screenshot("programs-advertiser")

			// An invitation-only program is not listed: the brand shares its id.
			var programID string
			adv.eval(fmt.Sprintf(`[...document.querySelectorAll('#programs tbody tr')].find(r => r.textContent.includes(%q)).dataset.id`, program), &programID)
			aff.open("/app/programs")
			aff.fill("#apply-id", programID)
			aff.click(`#apply-form button[type=submit]`)
			aff.waitFor("the program's listing", fmt.Sprintf(`document.querySelector('#programs .listing-card[data-id=%q] button.apply')`, programID))
			aff.click(fmt.Sprintf(`#programs .listing-card[data-id=%q] button.apply`, programID))
			aff.waitFor("the pending application", `document.querySelector('#programs .badge.pending')`)
			aff.screenshot("programs-affiliate")

			adv.open("/app/partnerships")
			adv.clickRow("#partnerships", program, w["approve"])
			adv.waitFor("the approved partnership", `document.querySelector('#partnerships .badge.approved')`)
			// The brand gives the affiliate a coupon code, which the affiliate sees.
			coupon := "POD-" + lang
			adv.clickRow("#partnerships", program, w["coupons"])
			adv.waitFor("the coupon codes", `document.querySelector('#coupons .empty, #coupons table') && document.activeElement.id === 'coupons-title'`)
			adv.fill("#c-code", coupon)
			adv.click(`#coupon-form button[type=submit]`)
			adv.flashSays(w["code_added"])
			adv.waitFor("the new code", fmt.Sprintf(`document.querySelector('#coupons').textContent.includes(%q)`, coupon))
			adv.screenshot("partnerships")
			aff.open("/app/partnerships")
			aff.clickRow("#partnerships", program, w["coupons"])
			aff.waitFor("the affiliate's code", fmt.Sprintf(`document.querySelector('#coupons').textContent.includes(%q)`, coupon))
			if aff.count(`#coupon-form`) != 0 {
				t.Fatal("an affiliate is offered to add coupon codes")
			}

			aff.open("/app/links")
			aff.waitFor("the program to link to", fmt.Sprintf(`[...document.querySelectorAll('#l-program option')].some(o => o.textContent === %q)`, program))
			aff.fill("#l-sub1", "newsletter")
			aff.click(`#link-form button[type=submit]`)
			aff.waitFor("the new link", `document.querySelector('#links tbody tr button.copy')`)
			var linkURL string
			aff.eval(`document.querySelector('#links tbody tr button.copy').dataset.value`, &linkURL)
			aff.screenshot("links")
			code := linkURL[strings.LastIndex(linkURL, "/c/")+3:]

			// Pausing and resuming a link keeps the keyboard on the link's button.
			aff.clickRow("#links", "newsletter", w["pause"])
			aff.waitFor("the paused link", `document.querySelector('#links .badge.paused') && document.activeElement.textContent.trim() === '`+w["resume"]+`'`)
			aff.clickRow("#links", "newsletter", w["resume"])
			aff.waitFor("the active link", `document.querySelector('#links .badge.active') && !document.querySelector('#links .badge.paused')`)

			// Six orders through the link: one approved on its own, two approved at once, two
			// rejected at once, one rejected on its own.
			key := adv.createAPIKey("shop server")
			// (No order id is a part of another: rows are found by their text.)
			var orders []string
			for i := range 6 {
				orders = append(orders, fmt.Sprintf("sneaker-%s-%d", lang, i+1))
			}
			for _, o := range orders {
				clickID := s.click(t, code)
				s.eventually(t, "the conversion is registered", func() (bool, string) {
					status, body := s.call(t, "POST", "/api/v1/conversions", key, `{"click_id":"`+clickID+`","external_id":"`+o+`","amount":"80.00"}`)
					return status == 201 || status == 200, fmt.Sprintf("%d %s", status, body)
				})
			}
			adv.open("/app/conversions")
			adv.clickRow("#conversions", orders[0], w["approve"])
			// The keyboard stays in the list, on the next pending commission's button.
			adv.waitFor("the approved commission, and focus on the next one's approve button", `document.querySelector('#conversions .badge.approved')
				&& document.activeElement.closest('#conversions tbody tr') && document.activeElement.textContent.trim() === '`+w["approve"]+`'`)
			// bulk selects the orders, presses the bulk button and waits for want badges.
			bulk := func(selected []string, button, flash, badge string, want int) {
				for _, o := range selected {
					adv.rowControl("#conversions", o, `input[type=checkbox]`)
				}
				adv.waitFor("the selection", `!document.getElementById('`+button+`').disabled`)
				adv.click("#" + button)
				adv.flashSays(w[flash])
				adv.waitFor("the commissions decided at once", fmt.Sprintf(`document.querySelectorAll('#conversions .badge.%s').length === %d`, badge, want))
			}
			bulk(orders[1:3], "bulk-approve", "bulk_approved", "approved", 3)
			bulk(orders[3:5], "bulk-reject", "bulk_rejected", "rejected", 2)
			adv.clickRow("#conversions", orders[5], w["reject"])
			// With no button left in the list, the keyboard stays on the table.
			adv.waitFor("the rejected commission, and focus on the table", `document.querySelectorAll('#conversions .badge.rejected').length === 3
				&& document.activeElement === document.querySelector('#conversions table')`)
			if n := adv.count(`#conversions .badge.pending`); n != 0 {
				t.Fatalf("%d commissions still pending, want none", n)
			}
			// An order with the coupon code and no click is the affiliate's too, and the list says
			// what attributed each conversion.
			couponOrder := "podcast-order-" + lang
			if status, body := s.call(t, "POST", "/api/v1/conversions", key, `{"coupon_code":"`+strings.ToLower(coupon)+`","external_id":"`+couponOrder+`","amount":"20.00"}`); status != 201 {
				t.Fatalf("coupon order: %d %s", status, body)
			}
			adv.open("/app/conversions")
			adv.waitFor("the attribution of each conversion", fmt.Sprintf(`(rows => rows.find(r => r.textContent.includes(%q)).textContent.includes(%q + %q)
				&& rows.find(r => r.textContent.includes(%q)).textContent.includes(%q))([...document.querySelectorAll('#conversions tbody tr')])`,
				couponOrder, w["by_coupon"], coupon, orders[0], w["by_click"]))
			adv.screenshot("conversions-attribution")

			// A payout marked failed, and one canceled, give their commissions back to the
			// next payout, which is paid.
			adv.open("/app/payouts")
			for i, action := range []string{"mark_failed", "cancel", "mark_paid"} {
				adv.waitFor("the affiliate to pay", `document.querySelector('#po-affiliate option')`)
				adv.click(`#payout-form button[type=submit]`)
				adv.waitFor("the new payout", fmt.Sprintf(`document.querySelectorAll('#payouts tbody tr').length === %d && document.querySelector('#payouts .badge.pending')`, i+1))
				if i == 0 {
					adv.screenshot("payouts")
				}
				adv.clickRow("#payouts", "", w[action])
				adv.waitFor("the payout's new status", `!document.querySelector('#payouts .badge.pending')`)
			}
			for _, status := range []string{"failed", "canceled", "paid"} {
				if n := adv.count(`#payouts .badge.` + status); n != 1 {
					t.Errorf("%d payouts %s, want 1", n, status)
				}
			}

			aff.open("/app/conversions")
			aff.waitFor("the paid commission, seen by the affiliate", `document.querySelector('#conversions .badge.paid')`)
			if aff.count(`#conversions button`) != 0 {
				t.Fatal("an affiliate is offered to approve or reject")
			}
			aff.open("/app/payouts")
			aff.waitFor("the paid payout, seen by the affiliate", `document.querySelector('#payouts .badge.paid')`)

			// The postback URL was set at the start: the commission's changes were delivered.
			aff.open("/app/settings/postbacks")
			aff.waitFor("a delivered postback in the log", `document.querySelector('#pb-deliveries .badge.succeeded')`)
			if receiver.count() == 0 {
				t.Fatal("the postback receiver got nothing")
			}
			aff.screenshot("postbacks")
		})
	}
}

func (b *browser) count(sel string) int {
	var n int
	b.eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, sel), &n)
	return n
}

// receiver is an HTTP server on loopback that answers 204 and counts what it gets.
type receiver struct {
	url string
	mu  sync.Mutex
	n   int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		r.n++
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// webhookWords are the labels and messages the webhook journey uses, per language.
var webhookWords = map[string]map[string]string{
	"en": {"edit": "Edit", "saved": "Webhook saved.", "rotate": "Rotate secret", "history": "History", "replay": "Replay",
		"replayed": "The delivery is queued for another attempt.", "none_queued": "0 failed deliveries", "two_queued": "2 failed deliveries"},
	"es": {"edit": "Editar", "saved": "Webhook guardado.", "rotate": "Rotar secreto", "history": "Historial", "replay": "Reenviar",
		"replayed": "La entrega está en cola para un nuevo intento.", "none_queued": "0 entregas fallidas", "two_queued": "2 entregas fallidas"},
}

// waitInHistory opens the delivery history of the webhook to url again and again until the
// JavaScript condition holds (deliveries are attempted by the workers in the background).
func (b *browser) waitInHistory(url, what, cond string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The history shown is marked, so that the wait below is for the one asked for now.
		var ignored bool
		b.eval(`(document.querySelectorAll('#deliveries > *').forEach(e => e.dataset.stale = '1'), true)`, &ignored)
		b.clickRow("#hooks", url, webhookWords[b.lang]["history"])
		b.waitFor("the delivery history", `document.querySelector('#deliveries > .empty:not([data-stale]), #deliveries > table:not([data-stale])')`)
		var ok bool
		b.eval("!!("+cond+")", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("browser (%s): the delivery history never showed %s", b.lang, what)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestBrowserWebhookJourney creates, edits and rotates a webhook in the browser and sees its
// deliveries, on the envtest control plane with the real controller and delivery workers.
func TestBrowserWebhookJourney(t *testing.T) {
	s := newStack(t, stackOptions{kube: true})
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			w := webhookWords[lang]
			b := newBrowser(t, s.base, lang, 1280, 900)
			email := "hooks-" + lang + "@example.test"
			b.signUp(s, email, "advertiser", "Hooks "+lang)
			rcv := newReceiver(t)

			b.open("/app/settings/webhooks")
			b.waitFor("the webhook list", `document.querySelector('#hooks .empty, #hooks table')`)
			b.fill("#hook-url", rcv.url+"/hooks")
			b.click(`input[name=events][value="conversion.created"]`)
			b.click(`#hook-form button[type=submit]`)
			b.waitFor("the signing secret, shown once", `document.getElementById('hook-secret-value').value.startsWith('whsec_')`)
			b.waitFor("the new webhook", `document.querySelector('#hooks tbody tr')`)

			b.clickRow("#hooks", rcv.url, w["edit"])
			b.fill("#hook-description", "orders "+lang)
			b.click(`#hook-form button[type=submit]`)
			b.flashSays(w["saved"])

			var first string
			b.eval(`document.getElementById('hook-secret-value').value`, &first)
			b.clickRow("#hooks", rcv.url, w["rotate"])
			b.waitFor("a new signing secret", fmt.Sprintf(`document.getElementById('hook-secret-value').value.startsWith('whsec_') && document.getElementById('hook-secret-value').value !== %q`, first))

			// A conversion of this advertiser is delivered to the webhook.
			key := b.createAPIKey("hooks server")
			clickID := s.trafficFor(t, email, "hooks-aff-"+lang+"@example.test")
			s.eventually(t, "the conversion is registered", func() (bool, string) {
				status, body := s.call(t, "POST", "/api/v1/conversions", key, `{"click_id":"`+clickID+`","external_id":"hook-order","amount":"10.00"}`)
				return status == 201 || status == 200, fmt.Sprintf("%d %s", status, body)
			})
			s.eventually(t, "the receiver gets the webhook", func() (bool, string) { return rcv.count() > 0, "nothing yet" })
			b.open("/app/settings/webhooks")
			b.waitInHistory(rcv.url, "a delivered webhook", `document.querySelector('#deliveries .badge.succeeded')`)
			b.click("#retry-failed")
			b.flashSays(w["none_queued"])

			// A delivery that used up its retries (recorded here rather than waited for) is
			// replayed from the history: the workers make one manual attempt, which the
			// receiver answers.
			var hookID string
			b.eval(fmt.Sprintf(`[...document.querySelectorAll('#hooks tbody tr')].find(r => r.textContent.includes(%q)).dataset.id`, rcv.url), &hookID)
			u, err := s.ids.UserByEmail(context.Background(), email)
			if err != nil {
				t.Fatal(err)
			}
			received := rcv.count()
			failed := s.failedDelivery(t, u.CompanyID, hookID, rcv.url+"/hooks")
			row := fmt.Sprintf(`#deliveries tr[data-id=%q]`, failed)
			b.waitInHistory(rcv.url, "the failed delivery", `document.querySelector('`+row+` .badge.failed')`)
			b.screenshot("webhooks")
			var label string
			b.eval(`document.querySelector('`+row+` button').getAttribute('aria-label')`, &label)
			if !strings.HasPrefix(label, w["replay"]) || !strings.Contains(label, "conversion.created") {
				t.Errorf("the replay button is labelled %q, want it to name the delivery", label)
			}
			b.waitFor("the replay button", `(btn => btn && (btn.click(), true))(document.querySelector('`+row+` button'))`)
			b.flashSays(w["replayed"])
			b.waitInHistory(rcv.url, "the replayed delivery, delivered", `document.querySelector('`+row+` .badge.succeeded')`)
			if rcv.count() <= received {
				t.Fatal("the replay reached the history but not the receiver")
			}

			// "Retry every failed delivery" queues each failed one of this webhook.
			more := []string{s.failedDelivery(t, u.CompanyID, hookID, rcv.url+"/hooks"), s.failedDelivery(t, u.CompanyID, hookID, rcv.url+"/hooks")}
			b.waitInHistory(rcv.url, "the two failed deliveries", `document.querySelectorAll('#deliveries .badge.failed').length === 2`)
			b.click("#retry-failed")
			b.flashSays(w["two_queued"])
			b.waitInHistory(rcv.url, "the retried deliveries, delivered", fmt.Sprintf(
				`document.querySelector('#deliveries tr[data-id=%q] .badge.succeeded') && document.querySelector('#deliveries tr[data-id=%q] .badge.succeeded')`, more[0], more[1]))

			// "Send test" sends one signed sample to the webhook and says what it answered.
			received = rcv.count()
			b.open("/app/settings/webhooks")
			b.waitFor("the webhook, ready", `document.querySelector('#hooks tbody tr .badge.active')`)
			b.clickRow("#hooks", rcv.url, sendTestWords[lang]["send"])
			b.flashSays(sendTestWords[lang]["ok"])
			if rcv.count() != received+1 {
				t.Fatalf("the receiver got %d requests from a test, want 1", rcv.count()-received)
			}
		})
	}
}

// TestBrowserSocialSignIn walks Google and LinkedIn sign-in in the browser, each provider a
// local OpenID Connect provider on loopback that approves at once: a sign-up through Google
// creates the company from the form, a later sign-in through LinkedIn with the same address
// lands in the same account, and an address the provider has not verified is turned away
// with the page's message.
func TestBrowserSocialSignIn(t *testing.T) {
	s := newStack(t, stackOptions{oidc: true})
	notVerified := map[string]string{"en": "The provider has not verified your e-mail address.",
		"es": "El proveedor no ha verificado tu dirección de correo."}
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			b := newBrowser(t, s.base, lang, 1280, 900)
			email := "social-" + lang + "@example.test"
			company := "Social Brand " + lang
			overview := `location.pathname === '/app' && document.querySelector('#chart-clicks svg')`

			s.google.SetUser(testenv.OIDCUser{Subject: "g-" + lang, Email: email, EmailVerified: true, Name: "Ada " + lang})
			b.open("/login")
			b.run(chromedp.Click("#to-signup", chromedp.ByQuery),
				chromedp.Click(`input[name=company_kind][value=advertiser]`, chromedp.ByQuery),
				chromedp.SendKeys("#company_name", company, chromedp.ByQuery))
			b.click(`a.oauth[data-provider=google]`)
			b.waitFor("the overview after signing up with Google", overview)
			u, err := s.ids.UserByEmail(context.Background(), email)
			if err != nil {
				t.Fatalf("no user after the Google sign-up: %v", err)
			}
			co, err := s.ids.CompanyByID(context.Background(), u.CompanyID)
			if err != nil || co.Name != company || co.Kind != identity.Advertiser || u.Locale != lang {
				t.Fatalf("company %+v (%v), user locale %q; want advertiser %q in %s", co, err, u.Locale, company, lang)
			}

			// LinkedIn sends email_verified as a string.
			b.click("#logout")
			b.waitFor("the sign-in page", `location.pathname === '/login'`)
			s.linkedin.SetUser(testenv.OIDCUser{Subject: "li-" + lang, Email: email, EmailVerified: "true", Name: "Ada " + lang})
			b.click(`a.oauth[data-provider=linkedin]`)
			b.waitFor("the overview after signing in with LinkedIn", overview)
			if again, err := s.ids.UserByEmail(context.Background(), email); err != nil || again.ID != u.ID {
				t.Fatalf("LinkedIn signed in %+v (%v), want the Google sign-up's user %s", again, err, u.ID)
			}

			b.click("#logout")
			b.waitFor("the sign-in page", `location.pathname === '/login'`)
			s.google.SetUser(testenv.OIDCUser{Subject: "g2-" + lang, Email: "unverified-" + lang + "@example.test", EmailVerified: false})
			b.click(`a.oauth[data-provider=google]`)
			b.waitFor("the sign-in page again", `location.pathname === '/login'`)
			b.flashSays(notVerified[lang])
		})
	}
}
