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

// TestBrowserEveryFormMarksItsErrors walks every form of the dashboard with bad input, as a
// visitor, a brand and an affiliate, in English and Spanish: each refusal is said under its
// field in the page's language, the field is marked aria-invalid and takes the keyboard, and
// none reaches the generic "Something went wrong". On the way, a brand lists an approval
// program in the directory with the program form's default, and an affiliate finds it in the
// listing's search with "Apply".
func TestBrowserEveryFormMarksItsErrors(t *testing.T) {
	s := newStack(t, stackOptions{kube: true})
	ctx := context.Background()

	setup := newBrowser(t, s.base, "en", 1280, 800)
	brandEmail, affEmail := "forms-brand@example.test", "forms-affiliate@example.test"
	setup.signUp(s, brandEmail, "advertiser", "Forms brand")
	brand := setup.cookies()
	brandID := s.companyOf(t, brandEmail)
	setup.run(network.ClearBrowserCookies())
	setup.signUp(s, affEmail, "affiliate", "Forms affiliate")
	affiliate := setup.cookies()
	affID := s.companyOf(t, affEmail)

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
	for _, lang := range []string{"en", "es"} {
		s.convert(t, key, s.click(t, link.Code), "order-to-reject-"+lang, "100.00", "EUR")
	}

	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			msg := func(id string) string { return dashboard.Message(t, lang, id) }
			b := newBrowser(t, s.base, lang, 1280, 800)

			// A visitor: the address, the company of a sign-up, the code.
			b.open("/login?lang=" + lang)
			b.fill("#email", "not-an-address")
			b.click(`#request-form button[type=submit]`)
			b.refused("a malformed address", "#email", msg("login.email_invalid"))
			b.click("#to-signup")
			b.fill("#email", "visitor-"+lang+"@example.test")
			b.click(`#request-form button[type=submit]`)
			b.refused("a sign-up without its company", "#company_name", msg("login.company_name_required"))
			b.open("/login?lang=" + lang)
			b.fill("#email", brandEmail)
			b.click(`#request-form button[type=submit]`)
			b.waitFor("the code field", `!document.getElementById('verify-form').hidden`)
			b.fill("#code", "12345")
			b.click(`#verify-form button[type=submit]`)
			b.refused("a short code", "#code", msg("login.code_invalid"))
			b.fill("#code", "000000")
			b.click(`#verify-form button[type=submit]`)
			b.refused("a wrong code", "#code", msg("error.invalid_code"))

			// The brand. Its leaderboard names the affiliate (its figures reach ClickHouse
			// within a second or so).
			b.signInWith(brand)
			s.eventually(t, "the affiliate named in the leaderboard", func() (bool, string) {
				b.open("/app?lang=" + lang)
				b.settle("the overview")
				got := b.eval2(`(document.querySelector('#leaders tbody') || {}).textContent || ''`)
				return strings.Contains(got, "Forms affiliate") && !strings.Contains(got, "co_"), got
			})
			b.setValue("#from", "2026-05-10")
			b.setValue("#to", "2026-05-01")
			b.click(`#range-form button[type=submit]`)
			b.refused("a range that ends before it starts", "#to", msg("overview.bad_range"))

			b.open("/app/programs?lang=" + lang)
			b.settle("the programs")
			// An approval program is listed by default in the form; a public one has no choice.
			if got := b.eval2(`[document.getElementById('p-visibility').value, document.getElementById('p-listed').checked, document.getElementById('p-listed-field').hidden].join()`); got != "approval,true,false" {
				t.Errorf("the program form's visibility, directory box and its field's hiding: %s", got)
			}
			b.setValue("#p-visibility", "public")
			if b.eval2(`document.getElementById('p-listed-field').hidden`) != "true" {
				t.Error("a public program is offered to stay out of the directory")
			}
			b.setValue("#p-visibility", "approval")
			listed := "Directory boots " + lang
			b.fill("#p-name", listed)
			b.fill("#p-landing", "https://shop.example/boots")
			b.fill("#p-value", "10")
			b.click(`#program-form button[type=submit]`)
			b.waitFor("the listed approval program", fmt.Sprintf(`[...document.querySelectorAll('#programs tbody tr')].some((r) => r.textContent.includes(%q) && r.textContent.includes(%q))`,
				listed, msg("programs.directory.listed")))
			b.clickRow("#programs", "Joined shoes", msg("promotions.title"))
			b.fill("#pr-title", "Spring")
			b.fill("#pr-landing", "not a page")
			b.click(`#promotion-form button[type=submit]`)
			b.refused("a promotion's landing page", "#pr-landing", msg("forms.field.invalid_url"))
			b.clickRow("#programs", "Joined shoes", msg("affiliate_invitations.invite"))
			b.click(`#invite-affiliate-form button[type=submit]`)
			b.refused("an invitation without an address", "#invite-affiliate-email", msg("team.email_required"))
			b.fill("#invite-affiliate-email", "someone@")
			b.click(`#invite-affiliate-form button[type=submit]`)
			b.refused("an invitation to a malformed address", "#invite-affiliate-email", msg("forms.field.invalid_email"))

			b.open("/app/partnerships?lang=" + lang)
			b.settle("the partnerships")
			b.clickRow("#partnerships", "Joined shoes", msg("coupons.title"))
			b.fill("#c-code", "not a code!")
			b.click(`#coupon-form button[type=submit]`)
			b.refused("a coupon code with spaces", "#c-code", "")

			b.open("/app/conversions?lang=" + lang)
			b.settle("the conversions")
			b.setValue("#f-from", "2026-05-10")
			b.setValue("#f-to", "2026-05-01")
			b.click(`#filter-form button[type=submit]`)
			b.refused("a filter that ends before it starts", "#f-to", msg("forms.field.not_after"))
			b.setValue("#f-from", "")
			b.setValue("#f-to", "")
			b.click(`#filter-form button[type=submit]`)
			b.waitFor("the conversion to reject", `[...document.querySelectorAll('#conversions tbody tr')].some((r) => r.textContent.includes('order-to-reject-`+lang+`'))`)
			b.setValue("#reject-reason", "a bell \u0007 in the reason")
			b.rowControl("#conversions", "order-to-reject-"+lang, "button.danger")
			b.refused("a rejection reason with a control character", "#reject-reason", msg("forms.field.invalid_text"))

			b.open("/app/payouts?lang=" + lang)
			b.settle("the payouts")
			b.waitFor("the affiliate in the payout form", `document.getElementById('po-affiliate').options.length > 0`)
			b.setValue("#po-start", "2026-05-10")
			b.setValue("#po-end", "2026-05-01")
			b.click(`#payout-form button[type=submit]`)
			b.refused("a payout period that ends before it starts", "#po-end", msg("forms.field.not_after"))

			b.open("/app/settings/webhooks?lang=" + lang)
			b.settle("the webhooks")
			b.click(`#hook-form button[type=submit]`)
			b.refused("a webhook without its address", "#hook-url", msg("webhooks.url_required"))
			b.fill("#hook-url", "not a url")
			b.eval2(`[...document.querySelectorAll('#hook-form input[name=events]')].forEach((c) => { c.checked = false; })`)
			b.click(`#hook-form button[type=submit]`)
			b.refused("a webhook without events", "#hook-form input[name=events]", msg("webhooks.events_required"))
			b.eval2(`document.querySelector('#hook-form input[name=events]').checked = true`)
			b.click(`#hook-form button[type=submit]`)
			b.refused("a webhook's address", "#hook-url", msg("forms.field.invalid_url"))

			b.open("/app/settings/api-keys?lang=" + lang)
			b.settle("the keys")
			b.setValue("#key-name", "a bell \u0007")
			b.click(`#create-form button[type=submit]`)
			b.refused("a key name with a control character", "#key-name", "")

			b.open("/app/settings/team?lang=" + lang)
			b.settle("the team")
			b.fill("#invite-email", "someone@")
			b.click(`#invite-form button[type=submit]`)
			b.refused("a colleague's malformed address", "#invite-email", msg("forms.field.invalid_email"))

			b.open("/app/settings/rates?lang=" + lang)
			b.settle("the rates")
			b.setValue("#r-base", "USD")
			b.setValue("#r-quote", "USD")
			b.fill("#r-rate", "0.9")
			b.click(`#rate-form button[type=submit]`)
			b.refused("a pair of one currency", "#r-quote", msg("forms.field.must_differ"))
			b.setValue("#r-quote", "EUR")
			b.fill("#r-rate", "abc")
			b.click(`#rate-form button[type=submit]`)
			b.refused("a rate that is no number", "#r-rate", msg("forms.field.not_a_decimal"))
			b.click(`#upload-form button[type=submit]`)
			b.refused("an upload without a file", "#r-file", msg("rates.no_file"))

			// The affiliate.
			b.signInWith(affiliate)
			b.open("/app/programs?lang=" + lang)
			b.settle("the listing")
			b.fill("#apply-id", "prg_nothing")
			b.click(`#apply-form button[type=submit]`)
			b.refused("an id that shows no program", "#apply-id", msg("programs.lookup.not_found"))
			// The listed approval program is found by a search, with Apply.
			b.fill("#s-q", listed)
			b.click(`#search-form button[type=submit]`)
			b.waitFor("the listed approval program with Apply", fmt.Sprintf(`(c => c.length === 1 && c[0].textContent.includes(%q) && c[0].querySelector('button.apply').textContent === %q)
				([...document.querySelectorAll('#programs .listing-card')])`, listed, msg("programs.apply")))
			b.click(`#programs .listing-card button.apply`)
			b.waitFor("the application waiting for the brand", `document.querySelector('#programs .listing-card .badge.pending')`)
			b.fill("#s-q", "Asked boots")
			b.click(`#search-form button[type=submit]`)
			b.waitFor("the program with a question", `document.querySelectorAll('#programs .listing-card').length === 1`)
			b.click(`#programs .listing-card button.apply`)
			b.click(`#programs .listing-card .apply-answers button[type=submit]`)
			b.refused("an unanswered question", `#programs .listing-card textarea[name=answer]`, msg("listing.answer_required"))

			b.open("/app/links?lang=" + lang)
			b.settle("the links")
			b.fill("#l-destination", "not a page")
			b.click(`#link-form button[type=submit]`)
			b.refused("a link's destination", "#l-destination", msg("forms.field.invalid_url"))

			b.open("/app/settings/postbacks?lang=" + lang)
			b.settle("the postbacks")
			b.fill("#pb-url", "not a url")
			b.click(`#postback-form button[type=submit]`)
			b.refused("a postback's address", "#pb-url", "")

			b.open("/app/settings/profile?lang=" + lang)
			b.settle("the profile")
			b.fill("#pf-website", "not a site")
			b.click(`#profile-form button[type=submit]`)
			b.refused("a profile's website", "#pf-website", msg("people.profile.invalid_website"))
		})
	}
}
