package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/partnerstream/partnerstream/internal/dashboard"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// envAxe names axe-core's script (hack/test.sh installs it with hack/npm-tools.sh axe).
const envAxe = "PARTNERSTREAM_AXE"

// axeSource reads axe-core; without it the test skips, except under CI=true.
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv(envAxe)
	if path == "" {
		path = filepath.Join("..", "..", "bin", "axe", "node_modules", "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("axe-core is missing (%v): run hack/npm-tools.sh axe", err)
		}
		t.Skipf("axe-core is missing (%v): run hack/npm-tools.sh axe", err)
	}
	return string(b)
}

// viewports are a desktop and a phone.
var viewports = []struct {
	name          string
	width, height int64
}{{"desktop", 1280, 800}, {"phone", 390, 844}}

// fitsJS lists what of the page is out of the user's reach: the page scrolling sideways, a
// value, a button, a link or a field whose box passes an edge of the viewport (inside a table
// that scrolls, too: a clipped column is a hidden value), a list whose option text is cut
// (every option of a short list, the chosen one of a long list),
// a navigation bar on two rows, and blank space below the content (hidden boxes taking room).
const fitsJS = `(() => {
  const W = window.innerWidth, out = [];
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '')
    + ' "' + (el.innerText || el.value || '').trim().slice(0, 40) + '"';
  const shown = (el) => !el.closest('.visually-hidden, [hidden], thead, .skip') && el.getClientRects().length > 0;
  if (document.documentElement.scrollWidth > W + 1) out.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' px wide in ' + W);
  for (const el of document.querySelectorAll('header a, header button, header summary, main td, main th, main dd, main button, main a, main input, main select, main textarea, main .badge')) {
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.width < 2 || r.height < 2) continue;
    if (r.left < -1 || r.right > W + 1) out.push(name(el) + ' is off screen (' + Math.round(r.left) + ' to ' + Math.round(r.right) + ' px of ' + W + ')');
  }
  // A choice is cut when the list, sized for that choice alone by the browser itself, would
  // be wider than it is.
  for (const sel of document.querySelectorAll('main select')) {
    if (!shown(sel) || !sel.options.length) continue;
    // Every choice of a short list; of a long one (the currencies), the one chosen.
    const opts = sel.options.length <= 20 ? [...sel.options] : [sel.options[sel.selectedIndex]];
    for (const o of opts) {
      if (!o || o.hidden) continue;
      const probe = document.createElement('select');
      probe.className = sel.className;
      probe.style.cssText = 'position:absolute;visibility:hidden;left:0;top:0;width:auto;max-width:none';
      probe.append(new Option(o.text));
      sel.parentElement.append(probe);
      const need = probe.getBoundingClientRect().width;
      probe.remove();
      if (need > sel.getBoundingClientRect().width + 1) { out.push(name(sel) + ' cuts its option "' + o.text + '" (' + Math.round(need) + ' px in ' + Math.round(sel.getBoundingClientRect().width) + ')'); break; }
    }
  }
  const items = [...document.querySelectorAll('.nav > ul > li')].filter(shown);
  if (items.length && new Set(items.map((li) => Math.round(li.getBoundingClientRect().top))).size > 1) out.push('the navigation wraps to several rows');
  const main = document.querySelector('main');
  const blank = document.documentElement.scrollHeight - Math.max(main.getBoundingClientRect().bottom + window.scrollY, window.innerHeight);
  if (blank > 64) out.push('blank space of ' + Math.round(blank) + ' px below the content');
  return out;
})()`

// checkFits fails on anything fitsJS finds.
func (b *browser) checkFits(where string) {
	b.t.Helper()
	var problems []string
	b.eval(fitsJS, &problems)
	for _, p := range problems {
		b.t.Errorf("%s: %s", where, p)
	}
}

// axeViolation is one of axe-core's findings.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any `json:"target"`
	} `json:"nodes"`
}

// checkAxe runs axe-core in the page and fails on every serious or critical issue.
func (b *browser) checkAxe(where, source string) {
	b.t.Helper()
	var loaded bool
	b.eval(source+";\ntrue", &loaded)
	var raw string
	b.run(chromedp.Evaluate(`axe.run(document, { resultTypes: ['violations'] }).then((r) => JSON.stringify(r.violations))`, &raw,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	var found []axeViolation
	if err := json.Unmarshal([]byte(raw), &found); err != nil {
		b.t.Fatalf("%s: axe's answer: %v", where, err)
	}
	for _, v := range found {
		if v.Impact != "serious" && v.Impact != "critical" {
			continue
		}
		var targets []string
		for _, n := range v.Nodes {
			targets = append(targets, fmt.Sprint(n.Target...))
		}
		b.t.Errorf("%s: axe %s (%s): %s at %s", where, v.ID, v.Impact, v.Help, strings.Join(targets, ", "))
	}
}

// settle waits until the page's module has drawn what it loads: every visible table holder
// filled, nothing busy.
func (b *browser) settle(what string) {
	b.t.Helper()
	b.waitFor(what+" drawn", `document.readyState === 'complete' && !document.querySelector('[aria-busy="true"]')
		&& [...document.querySelectorAll('.table-wrap')].filter((el) => !el.closest('[hidden]')).every((el) => el.childElementCount > 0)
		&& (!document.querySelector('#chart-clicks') || document.querySelector('#chart-clicks svg'))`)
	time.Sleep(200 * time.Millisecond)
}

// viewport makes the tab's viewport exactly width × height.
func (b *browser) viewport(width, height int64) {
	b.t.Helper()
	b.run(emulation.SetDeviceMetricsOverride(width, height, 1, false))
}

func (b *browser) cookies() []*network.Cookie {
	b.t.Helper()
	var got []*network.Cookie
	b.run(chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		got, err = network.GetCookies().Do(ctx)
		return err
	}))
	return got
}

// signInWith replaces the tab's cookies with a session's.
func (b *browser) signInWith(cookies []*network.Cookie) {
	b.t.Helper()
	b.run(network.ClearBrowserCookies(), chromedp.ActionFunc(func(ctx context.Context) error {
		for _, c := range cookies {
			if err := network.SetCookie(c.Name, c.Value).WithURL(b.base + c.Path).WithPath(c.Path).WithHTTPOnly(c.HTTPOnly).Do(ctx); err != nil {
				return err
			}
		}
		return nil
	}))
}

// formWords are what the form checks expect, per language: the catalogue's sentences.
var formWords = map[string]map[string]string{
	"en": {"signup": "Create your account", "invalid_url": "Enter a full web address starting with https://.",
		"not_a_decimal": "Enter a number, such as 12.50.", "amount": "12.50", "shown": "$12.50", "generic": "Something went wrong",
		"no_commissions": "No approved commissions to pay"},
	"es": {"signup": "Crea tu cuenta", "invalid_url": "Escribe una dirección web completa que empiece por https://.",
		"not_a_decimal": "Escribe un número, como 12,50.", "amount": "12,50", "shown": "12,50", "generic": "Algo salió mal",
		"no_commissions": "No hay comisiones aprobadas que pagar"},
}

// long is an unbroken value longer than a phone is wide.
const long = "a_very_long_unbroken_value_without_any_space_that_must_wrap_on_a_phone_0123456789abcdef"

// TestBrowserEveryPageFits visits every page the dashboard declares as a brand and as an
// affiliate, in English and Spanish, on a 1280×800 desktop and a 390×844 phone, with long
// unbroken values in the tables, and fails when a value or a button is off screen, the
// navigation wraps, blank space trails the content, or axe-core finds a serious or critical
// issue. It also walks the forms' errors: under their fields, translated, focused.
func TestBrowserEveryPageFits(t *testing.T) {
	s := newStack(t, stackOptions{kube: true})
	axe := axeSource(t)
	ctx := context.Background()

	_, brand, brandID, _, affiliate, affID := s.signUpPair(t, "fits", "Fits")

	// Tables with long unbroken values: a key name, a landing page, a sub1, an order id.
	if _, _, err := s.ids.CreateAPIKey(ctx, brandID, long); err != nil {
		t.Fatal(err)
	}
	key, _, err := s.ids.CreateAPIKey(ctx, brandID, "server")
	if err != nil {
		t.Fatal(err)
	}
	owner := programs.Actor{CompanyID: brandID, Kind: identity.Advertiser, Role: "owner"}
	prog, err := s.prg.CreateProgram(ctx, owner, programs.ProgramInput{Name: "Dollar shoes", LandingURL: "https://shop.example/" + long, Currency: "USD",
		Commission: &programs.RuleInput{Type: "fixed", Amount: "12.50"}, Visibility: "public"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.prg.Apply(ctx, programs.Actor{CompanyID: affID, Kind: identity.Affiliate, Role: "owner"}, programs.ApplyInput{ProgramID: prog.ID}); err != nil {
		t.Fatal(err)
	}
	link, err := s.lks.Create(ctx, affID, identity.Affiliate, links.NewLink{ProgramID: prog.ID, DestinationURL: "https://shop.example/" + long, Subs: [5]string{long}})
	if err != nil {
		t.Fatal(err)
	}
	s.convert(t, key, s.click(t, link.Code), "order-"+long, "100.00", "USD")

	for _, lang := range []string{"en", "es"} {
		w := formWords[lang]
		t.Run("forms in "+lang, func(t *testing.T) {
			b := newBrowser(t, s.base, lang, 1280, 800)

			// Sign-up says so in its heading, and says once that a code was sent.
			b.open("/login?lang=" + lang)
			b.click("#to-signup")
			if got := b.text("h1"); got != w["signup"] {
				t.Errorf("the sign-up heading is %q, want %q", got, w["signup"])
			}
			visitor := "visitor-" + lang + "@example.test"
			b.fill("#email", visitor)
			b.fill("#company_name", "Visitor "+lang)
			b.click(`#request-form button[type=submit]`)
			b.waitFor("the code field", `!document.getElementById('verify-form').hidden`)
			var sent int
			b.eval(fmt.Sprintf(`document.body.innerText.split(%q).length - 1`, visitor), &sent)
			if sent != 1 {
				t.Errorf("the page says %d times that a code was sent to %s, want once", sent, visitor)
			}

			// A refused program: each error under its field, translated, the first one focused.
			b.signInWith(brand)
			b.open("/app/programs?lang=" + lang)
			b.settle("the programs")
			if got := b.eval2(`document.getElementById('p-currency').value`); got != "EUR" {
				t.Errorf("the program form's currency is %q, want EUR by default", got)
			}
			if b.eval2(`String(document.getElementById('p-recurring-months-field').hidden)`) != "true" {
				t.Error("the months of recurring commission are asked while recurring is off")
			}
			b.fill("#p-name", "Refused "+lang)
			b.fill("#p-landing", "shop dot example")
			b.fill("#p-value", "abc")
			b.click(`#program-form button[type=submit]`)
			b.waitFor("the field errors", `document.querySelectorAll('#program-form .field-error').length === 2`)
			var marks string
			b.eval(`JSON.stringify([document.activeElement.id,
				document.getElementById('p-landing').getAttribute('aria-invalid'), document.getElementById('p-landing').getAttribute('aria-describedby'),
				document.getElementById('p-landing-error').textContent, document.getElementById('p-value').getAttribute('aria-invalid'),
				document.getElementById('p-value-error').textContent])`, &marks)
			if want := fmt.Sprintf(`["p-landing","true","p-landing-error",%q,"true",%q]`, w["invalid_url"], w["not_a_decimal"]); marks != want {
				t.Errorf("the marked fields: %s, want %s", marks, want)
			}
			if flash := b.text("#flash"); strings.Contains(flash, w["generic"]) || strings.Contains(flash, "landing_url") {
				t.Errorf("a form error reached the banner as %q", flash)
			}
			b.checkAxe("the program form with errors ("+lang+")", axe)

			// The amount as the page writes it: "12,50" in Spanish.
			b.fill("#p-landing", "https://shop.example/")
			b.fill("#p-value", w["amount"])
			b.eval2(`(s => { s.value = 'USD'; document.getElementById('p-visibility').value = 'public'; return s.value; })(document.getElementById('p-currency'))`)
			b.click(`#program-form button[type=submit]`)
			b.waitFor("the program in the list", fmt.Sprintf(`document.querySelector('#programs').textContent.includes(%q)`, "Refused "+lang))
			if n := b.count("#program-form [aria-invalid]"); n != 0 {
				t.Errorf("%d fields stay marked after the program was created", n)
			}
			if row := b.eval2(fmt.Sprintf(`[...document.querySelectorAll('#programs tbody tr')].find((r) => r.textContent.includes(%q)).textContent`, "Refused "+lang)); !strings.Contains(row, w["shown"]) {
				t.Errorf("the program created with %q shows %q, want %s", w["amount"], row, w["shown"])
			}

			// The payout form offers the brand's currency, and a known refusal has its own words.
			b.open("/app/payouts?lang=" + lang)
			b.settle("the payouts")
			b.waitFor("the brand's currency in the payout form", `document.getElementById('po-currency').value === 'USD'`)
			b.waitFor("the affiliate in the payout form", `document.getElementById('po-affiliate').options.length > 0`)
			b.click(`#payout-form button[type=submit]`)
			b.flashSays(w["no_commissions"])

			// Joining a program and creating a link keep the keyboard on the row.
			b.signInWith(affiliate)
			b.open("/app/programs?lang=" + lang)
			b.settle("the programs")
			joined := "Refused " + lang
			b.waitFor("the program's card", fmt.Sprintf(`(c => c && (c.querySelector('button.primary').click(), true))([...document.querySelectorAll('#programs .listing-card')].find((c) => c.textContent.includes(%q)))`, joined))
			b.waitFor("the focus on the joined program's card", fmt.Sprintf(`(c => c && c.textContent.includes(%q))(document.activeElement.closest('.listing-card'))`, joined))
			b.open("/app/links?lang=" + lang)
			b.settle("the links")
			b.click(`#link-form button[type=submit]`)
			b.waitFor("the focus on the new link's copy button", `document.activeElement.matches('#links tbody tr button.copy')`)
		})
	}

	accounts := []struct {
		kind    string
		cookies []*network.Cookie
	}{{identity.Advertiser, brand}, {identity.Affiliate, affiliate}}
	for _, lang := range []string{"en", "es"} {
		for _, vp := range viewports {
			t.Run(fmt.Sprintf("every page in %s on a %s", lang, vp.name), func(t *testing.T) {
				b := newBrowser(t, s.base, lang, int(vp.width), int(vp.height))
				b.viewport(vp.width, vp.height)
				for _, mode := range []string{"", "&signup=1"} {
					where := fmt.Sprintf("/login%s (%s, %d px)", mode, lang, vp.width)
					b.open("/login?lang=" + lang + mode)
					b.settle(where)
					b.checkFits(where)
					b.checkAxe(where, axe)
				}
				for _, a := range accounts {
					b.signInWith(a.cookies)
					for _, p := range dashboard.PagePaths(a.kind) {
						where := fmt.Sprintf("%s as %s (%s, %d px)", p[1], a.kind, lang, vp.width)
						b.open(p[1] + "?lang=" + lang)
						// (An expired access token goes by the sign-in page and comes back.)
						b.waitFor(where+", signed in", fmt.Sprintf(`location.pathname === %q`, p[1]))
						b.settle(where)
						b.checkFits(where)
						b.checkAxe(where, axe)
						if vp.name == "desktop" {
							b.screenshot(a.kind + "-" + p[0])
						}
					}
				}
			})
		}
	}
}

// eval2 evaluates an expression to a string.
func (b *browser) eval2(js string) string {
	b.t.Helper()
	var s string
	b.eval(`String(`+js+`)`, &s)
	return s
}
