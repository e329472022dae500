package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"

	"github.com/partnerstream/partnerstream/internal/dashboard"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// refused waits until the control sel is marked as refused: aria-invalid, the message want
// (any message when want is empty) under it in its field, the keyboard on it, and the live
// region without the generic message or a field list that no control took.
func (b *browser) refused(what, sel, want string) {
	b.t.Helper()
	generic := strings.Split(dashboard.Message(b.t, b.lang, "error.generic"), "{")[0]
	unplaced := strings.Split(dashboard.Message(b.t, b.lang, "error.validation"), "{")[0]
	b.waitFor(what+" marked under "+sel, fmt.Sprintf(`(el => {
		if (!el || el.getAttribute('aria-invalid') !== 'true' || document.activeElement !== el) return false;
		const notes = (el.getAttribute('aria-describedby') || '').split(' ').map((id) => document.getElementById(id)).filter(Boolean);
		const errs = notes.filter((n) => n.classList.contains('field-error') && n.textContent.trim() && !n.hidden);
		const said = errs.map((n) => n.textContent.trim()).join(' ');
		return said !== '' && (%q === '' || said.includes(%q)) && errs.every((n) => (el.closest('.field') || el.parentElement).contains(n));
	})(document.querySelector(%q))`, want, want, sel))
	flash := b.text("#flash")
	if strings.Contains(flash, generic) || strings.Contains(flash, unplaced) {
		b.t.Errorf("%s: the live region says %q", what, flash)
	}
}

// setValue sets a control's value as a user would choose it (dates, lists, and characters a
// keyboard does not type), and says so to the page's listeners.
func (b *browser) setValue(sel, value string) {
	b.t.Helper()
	// JSON, not %q: JavaScript reads Go's \a as a plain "a".
	quoted, _ := json.Marshal(value)
	b.waitFor("the control "+sel, fmt.Sprintf(`(el => el && (el.value = %s, el.dispatchEvent(new Event('change', { bubbles: true })), true))(document.querySelector(%q))`, quoted, sel))
}

// signUpPair signs up a brand and an affiliate in the browser (<prefix>-brand@ and
// <prefix>-affiliate@example.test, companies "<name> brand" and "<name> affiliate") and
// returns each one's address, session cookies and company id.
func (s *stack) signUpPair(t *testing.T, prefix, name string) (brandEmail string, brand []*network.Cookie, brandID string,
	affEmail string, affiliate []*network.Cookie, affID string) {
	t.Helper()
	b := newBrowser(t, s.base, "en", 1280, 800)
	brandEmail, affEmail = prefix+"-brand@example.test", prefix+"-affiliate@example.test"
	b.signUp(s, brandEmail, "advertiser", name+" brand")
	brand, brandID = b.cookies(), s.companyOf(t, brandEmail)
	b.run(network.ClearBrowserCookies())
	b.signUp(s, affEmail, "affiliate", name+" affiliate")
	affiliate, affID = b.cookies(), s.companyOf(t, affEmail)
	return brandEmail, brand, brandID, affEmail, affiliate, affID
}

// badInput is one refusal a form walk provokes: values chosen (set) or typed (fill) into
// controls, a click (click), then the control that must be marked (field) with the
// catalogue's message want ("" for any message).
type badInput struct {
	what        string
	set, fill   [][2]string
	click       string
	field, want string
}

// tryForm makes each bad input in turn on the page open and checks its refusal (refused).
func (b *browser) tryForm(inputs ...badInput) {
	b.t.Helper()
	for _, in := range inputs {
		for _, kv := range in.set {
			b.setValue(kv[0], kv[1])
		}
		for _, kv := range in.fill {
			b.fill(kv[0], kv[1])
		}
		b.click(in.click)
		want := ""
		if in.want != "" {
			want = dashboard.Message(b.t, b.lang, in.want)
		}
		b.refused(in.what, in.field, want)
		b.checkFits(in.what)
	}
}

// openPage opens a dashboard page in the browser's language and waits for its data.
func (b *browser) openPage(path string) {
	b.t.Helper()
	b.open(path + "?lang=" + b.lang)
	b.settle(path)
}

// TestBrowserEveryFormMarksItsErrors walks every form of the dashboard with bad input, as a
// visitor, a brand and an affiliate, in English and Spanish, at 1280×800 and 390×844: each
// refusal is said under its field in the page's language, the field is marked aria-invalid
// and takes the keyboard, none reaches the generic "Something went wrong", and the page with
// its messages still fits the viewport (checkFits). On the way, a brand lists an approval
// program in the directory with the program form's default, and an affiliate finds it in the
// listing's search with "Apply".
func TestBrowserEveryFormMarksItsErrors(t *testing.T) {
	s := newStack(t, stackOptions{kube: true})
	ctx := context.Background()

	_, brand, brandID, _, affiliate, affID := s.signUpPair(t, "forms", "Forms")

	// A partnership with a pending conversion (for the rejection reason), and a program asking
	// a question the affiliate has not answered yet.
	key, _, err := s.ids.CreateAPIKey(ctx, brandID, "server")
	if err != nil {
		t.Fatal(err)
	}
	owner := programs.Actor{CompanyID: brandID, Kind: identity.Advertiser, Role: "owner"}
	aff := programs.Actor{CompanyID: affID, Kind: identity.Affiliate, Role: "owner"}
	program := func(name string, questions ...programs.Question) programs.Program {
		p, err := s.prg.CreateProgram(ctx, owner, programs.ProgramInput{Name: name, LandingURL: "https://shop.example/", Currency: "EUR",
			Commission: &programs.RuleInput{Type: "fixed", Amount: "5.00"}, Visibility: programs.Public, Questions: questions})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	shoes := program("Joined shoes")
	program("Asked boots", programs.Question{Text: "Where will you promote us?", Required: true})
	if _, _, err := s.prg.Apply(ctx, aff, programs.ApplyInput{ProgramID: shoes.ID}); err != nil {
		t.Fatal(err)
	}
	link, err := s.lks.Create(ctx, affID, identity.Affiliate, links.NewLink{ProgramID: shoes.ID})
	if err != nil {
		t.Fatal(err)
	}
	langs := []string{"en", "es"}
	for _, lang := range langs {
		for _, vp := range viewports {
			s.convert(t, key, s.click(t, link.Code), "order-to-reject-"+lang+"-"+vp.name, "100.00", "EUR")
		}
	}

	for _, lang := range langs {
		for _, vp := range viewports {
			suffix := lang + "-" + vp.name
			t.Run(fmt.Sprintf("in %s on a %s", lang, vp.name), func(t *testing.T) {
				msg := func(id string) string { return dashboard.Message(t, lang, id) }
				b := newBrowser(t, s.base, lang, int(vp.width), int(vp.height))
				b.viewport(vp.width, vp.height)
				submit := func(form string) string { return form + ` button[type=submit]` }
				// A period that ends before it starts.
				period := func(from, to string) [][2]string { return [][2]string{{from, "2026-05-10"}, {to, "2026-05-01"}} }

				// A visitor: the address, the company of a sign-up, the code.
				b.open("/login?lang=" + lang)
				b.tryForm(badInput{what: "a malformed address", fill: [][2]string{{"#email", "not-an-address"}}, click: submit("#request-form"),
					field: "#email", want: "login.email_invalid"})
				b.click("#to-signup")
				b.tryForm(badInput{what: "a sign-up without its company", fill: [][2]string{{"#email", "visitor-" + suffix + "@example.test"}},
					click: submit("#request-form"), field: "#company_name", want: "login.company_name_required"})
				b.open("/login?lang=" + lang)
				b.fill("#email", "someone-"+suffix+"@example.test")
				b.click(submit("#request-form"))
				b.waitFor("the code field", `!document.getElementById('verify-form').hidden`)
				b.tryForm(
					badInput{what: "a short code", fill: [][2]string{{"#code", "12345"}}, click: submit("#verify-form"), field: "#code", want: "login.code_invalid"},
					badInput{what: "a wrong code", fill: [][2]string{{"#code", "000000"}}, click: submit("#verify-form"), field: "#code", want: "error.invalid_code"})

				// The brand. Its leaderboard names the affiliate (its figures reach ClickHouse
				// within a second or so).
				b.signInWith(brand)
				s.eventually(t, "the affiliate named in the leaderboard", func() (bool, string) {
					b.openPage("/app")
					got := b.eval2(`(document.querySelector('#leaders tbody') || {}).textContent || ''`)
					return strings.Contains(got, "Forms affiliate") && !strings.Contains(got, "co_"), got
				})
				b.tryForm(badInput{what: "a range that ends before it starts", set: period("#from", "#to"), click: submit("#range-form"),
					field: "#to", want: "overview.bad_range"})

				b.openPage("/app/programs")
				// An approval program is listed by default in the form; a public one has no choice.
				if got := b.eval2(`[document.getElementById('p-visibility').value, document.getElementById('p-listed').checked, document.getElementById('p-listed-field').hidden].join()`); got != "approval,true,false" {
					t.Errorf("the program form's visibility, directory box and its field's hiding: %s", got)
				}
				b.setValue("#p-visibility", "public")
				if b.eval2(`document.getElementById('p-listed-field').hidden`) != "true" {
					t.Error("a public program is offered to stay out of the directory")
				}
				b.setValue("#p-visibility", "approval")
				listed := "Directory boots " + suffix
				b.fill("#p-name", listed)
				b.fill("#p-landing", "https://shop.example/boots")
				b.fill("#p-value", "10")
				b.click(submit("#program-form"))
				b.waitFor("the listed approval program", fmt.Sprintf(`[...document.querySelectorAll('#programs tbody tr')].some((r) => r.textContent.includes(%q) && r.textContent.includes(%q))`,
					listed, msg("programs.directory.listed")))
				b.clickRow("#programs", "Joined shoes", msg("promotions.title"))
				b.tryForm(badInput{what: "a promotion's landing page", fill: [][2]string{{"#pr-title", "Spring"}, {"#pr-landing", "not a page"}},
					click: submit("#promotion-form"), field: "#pr-landing", want: "forms.field.invalid_url"})
				b.clickRow("#programs", "Joined shoes", msg("affiliate_invitations.invite"))
				b.tryForm(
					badInput{what: "an invitation without an address", click: submit("#invite-affiliate-form"), field: "#invite-affiliate-email", want: "team.email_required"},
					badInput{what: "an invitation to a malformed address", fill: [][2]string{{"#invite-affiliate-email", "someone@"}}, click: submit("#invite-affiliate-form"),
						field: "#invite-affiliate-email", want: "forms.field.invalid_email"})

				b.openPage("/app/partnerships")
				b.clickRow("#partnerships", "Joined shoes", msg("coupons.title"))
				// The list loads, then takes the focus: typing before that loses the keys that follow.
				b.waitFor("the coupon codes", `document.querySelector('#coupons .empty, #coupons table') && document.activeElement.id === 'coupons-title'`)
				b.tryForm(badInput{what: "a coupon code with spaces", fill: [][2]string{{"#c-code", "not a code!"}}, click: submit("#coupon-form"), field: "#c-code"})

				b.openPage("/app/conversions")
				b.tryForm(badInput{what: "a filter that ends before it starts", set: period("#f-from", "#f-to"), click: submit("#filter-form"),
					field: "#f-to", want: "forms.field.not_after"})
				b.setValue("#f-from", "")
				b.setValue("#f-to", "")
				b.click(submit("#filter-form"))
				order := "order-to-reject-" + suffix
				b.waitFor("the conversion to reject", fmt.Sprintf(`[...document.querySelectorAll('#conversions tbody tr')].some((r) => r.textContent.includes(%q))`, order))
				b.setValue("#reject-reason", "a bell \u0007 in the reason")
				b.rowControl("#conversions", order, "button.danger")
				b.refused("a rejection reason with a control character", "#reject-reason", msg("forms.field.invalid_text"))

				b.openPage("/app/payouts")
				b.waitFor("the affiliate in the payout form", `document.getElementById('po-affiliate').options.length > 0`)
				b.tryForm(badInput{what: "a payout period that ends before it starts", set: period("#po-start", "#po-end"), click: submit("#payout-form"),
					field: "#po-end", want: "forms.field.not_after"})

				b.openPage("/app/settings/webhooks")
				b.eval2(`[...document.querySelectorAll('#hook-form input[name=events]')].forEach((c) => { c.checked = false; })`)
				b.tryForm(
					badInput{what: "a webhook without its address", click: submit("#hook-form"), field: "#hook-url", want: "webhooks.url_required"},
					badInput{what: "a webhook without events", fill: [][2]string{{"#hook-url", "not a url"}}, click: submit("#hook-form"),
						field: "#hook-form input[name=events]", want: "webhooks.events_required"})
				b.eval2(`document.querySelector('#hook-form input[name=events]').checked = true`)
				b.tryForm(badInput{what: "a webhook's address", click: submit("#hook-form"), field: "#hook-url", want: "forms.field.invalid_url"})

				b.openPage("/app/settings/api-keys")
				b.tryForm(badInput{what: "a key name with a control character", set: [][2]string{{"#key-name", "a bell \u0007"}}, click: submit("#create-form"), field: "#key-name"})

				b.openPage("/app/settings/team")
				b.tryForm(badInput{what: "a colleague's malformed address", fill: [][2]string{{"#invite-email", "someone@"}}, click: submit("#invite-form"),
					field: "#invite-email", want: "forms.field.invalid_email"})

				b.openPage("/app/settings/rates")
				b.tryForm(
					badInput{what: "a pair of one currency", set: [][2]string{{"#r-base", "USD"}, {"#r-quote", "USD"}}, fill: [][2]string{{"#r-rate", "0.9"}},
						click: submit("#rate-form"), field: "#r-quote", want: "forms.field.must_differ"},
					badInput{what: "a rate that is no number", set: [][2]string{{"#r-quote", "EUR"}}, fill: [][2]string{{"#r-rate", "abc"}},
						click: submit("#rate-form"), field: "#r-rate", want: "forms.field.not_a_decimal"})
				if vp.name == "desktop" {
					b.screenshot("rates-errors")
				}
				b.tryForm(
					badInput{what: "an upload without a file", click: submit("#upload-form"), field: "#r-file", want: "rates.no_file"})

				// The affiliate.
				b.signInWith(affiliate)
				b.openPage("/app/programs")
				b.tryForm(badInput{what: "an id that shows no program", fill: [][2]string{{"#apply-id", "prg_nothing"}}, click: submit("#apply-form"),
					field: "#apply-id", want: "programs.lookup.not_found"})
				// The listed approval program is found by a search, with Apply.
				b.fill("#s-q", listed)
				b.click(submit("#search-form"))
				b.waitFor("the listed approval program with Apply", fmt.Sprintf(`(c => c.length === 1 && c[0].textContent.includes(%q) && c[0].querySelector('button.apply').textContent === %q)
				([...document.querySelectorAll('#programs .listing-card')])`, listed, msg("programs.apply")))
				b.click(`#programs .listing-card button.apply`)
				b.waitFor("the application waiting for the brand", `document.querySelector('#programs .listing-card .badge.pending')`)
				b.fill("#s-q", "Asked boots")
				b.click(submit("#search-form"))
				b.waitFor("the program with a question", `document.querySelectorAll('#programs .listing-card').length === 1`)
				b.click(`#programs .listing-card button.apply`)
				b.tryForm(badInput{what: "an unanswered question", click: submit(`#programs .listing-card .apply-answers`),
					field: `#programs .listing-card textarea[name=answer]`, want: "listing.answer_required"})

				b.openPage("/app/links")
				b.tryForm(badInput{what: "a link's destination", fill: [][2]string{{"#l-destination", "not a page"}}, click: submit("#link-form"),
					field: "#l-destination", want: "forms.field.invalid_url"})
				b.openPage("/app/settings/postbacks")
				b.tryForm(badInput{what: "a postback's address", fill: [][2]string{{"#pb-url", "not a url"}}, click: submit("#postback-form"), field: "#pb-url"})
				b.openPage("/app/settings/profile")
				b.tryForm(badInput{what: "a profile's website", fill: [][2]string{{"#pf-website", "not a site"}}, click: submit("#profile-form"),
					field: "#pf-website", want: "people.profile.invalid_website"})
			})
		}
	}
}
