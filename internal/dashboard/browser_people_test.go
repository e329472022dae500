package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// peopleWords are the strings the people journey reads and clicks, per language.
var peopleWords = map[string]map[string]string{
	"en": {"owner": "Owner", "profile": "Profile", "saved": "Profile saved.", "fix": "Some fields need fixing",
		"bad_website": "Enter a full web address", "bad_email": "Enter one e-mail address"},
	"es": {"owner": "Titular", "profile": "Perfil", "saved": "Perfil guardado.", "fix": "Hay campos que corregir",
		"bad_website": "Escribe una dirección web completa", "bad_email": "Escribe una sola dirección de correo"},
}

// fitsViewport fails unless the element is inside the window, shows its content whole (no
// ellipsis, nothing scrolled off) and the page does not scroll sideways.
func (b *browser) fitsViewport(sel string) {
	b.t.Helper()
	var out string
	b.eval(fmt.Sprintf(`(() => { const el = document.querySelector(%q), r = el.getBoundingClientRect();
		const over = document.documentElement.scrollWidth - window.innerWidth, cut = el.scrollWidth - el.clientWidth;
		return (r.width > 0 && r.left >= 0 && r.right <= window.innerWidth && over <= 0 && cut <= 1) ? '' :
			JSON.stringify({left: r.left, right: r.right, width: r.width, window: window.innerWidth, over, cut}); })()`, sel), &out)
	if out != "" {
		b.t.Errorf("%s is not inside the %s window: %s", sel, b.lang, out)
	}
}

// checkHeader fails unless the header names the user, the company and the role inside the
// window.
func (b *browser) checkHeader(email, company, role string) {
	b.t.Helper()
	got := b.text("#whoami")
	for _, want := range []string{email, company, role} {
		if !strings.Contains(got, want) {
			b.t.Errorf("the header says %q, want %q in it", got, want)
		}
	}
	b.fitsViewport("#whoami .whoami-user")
	b.fitsViewport("#whoami .whoami-org")
}

// TestBrowserNamesAndProfiles walks the people of the dashboard in English and Spanish: who is signed
// in in the header (at 1280 px and on a 390 px phone), an affiliate's partner profile with
// its refused fields marked, and the brand seeing the affiliate by name on its
// partnerships, payout form and links, and its profile.
func TestBrowserNamesAndProfiles(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := context.Background()
	for _, c := range []struct {
		lang          string
		width, height int
	}{{"en", 1280, 900}, {"es", 1280, 900}} {
		t.Run("in "+c.lang, func(t *testing.T) {
			w := peopleWords[c.lang]
			advEmail, affEmail := "brand-people-"+c.lang+"@example.test", "partner-people-"+c.lang+"@example.test"
			adv := newBrowser(t, s.base, c.lang, c.width, c.height)
			adv.signUp(s, advEmail, "advertiser", "Brand "+c.lang)
			aff := newBrowser(t, s.base, c.lang, c.width, c.height)
			aff.signUp(s, affEmail, "affiliate", "Blog "+c.lang)

			// The header says who is signed in, for which company, with which role.
			adv.checkHeader(advEmail, "Brand "+c.lang, w["owner"])
			aff.checkHeader(affEmail, "Blog "+c.lang, w["owner"])

			// The affiliate's profile: refused fields are marked, then it is saved.
			aff.open("/app/settings/profile")
			aff.waitFor("the profile", fmt.Sprintf(`document.getElementById('pf-display_name').value === %q`, "Blog "+c.lang))
			aff.fill("#pf-website", "ftp://blog.example")
			aff.fill("#pf-payout_email", "not an address")
			aff.click(`#profile-form button[type=submit]`)
			aff.flashSays(w["fix"])
			aff.waitFor("the refused fields marked", `document.getElementById('pf-website').getAttribute('aria-invalid') === 'true' &&
				document.getElementById('pf-payout_email').getAttribute('aria-invalid') === 'true' &&
				!document.getElementById('pf-display_name').hasAttribute('aria-invalid') && document.activeElement.id === 'pf-website'`)
			if got := aff.text("#pf-website-error"); !strings.Contains(got, w["bad_website"]) {
				t.Errorf("the website's message %q, want %q", got, w["bad_website"])
			}
			if got := aff.text("#pf-payout_email-error"); !strings.Contains(got, w["bad_email"]) {
				t.Errorf("the payout e-mail's message %q, want %q", got, w["bad_email"])
			}
			aff.fitsViewport("#pf-payout_email-error")
			name := "Ana's Deals " + c.lang
			aff.fill("#pf-display_name", name)
			aff.fill("#pf-website", "https://deals.example.org/"+c.lang)
			aff.fill("#pf-audience", "Bargain hunters, 40k newsletter readers")
			aff.fill("#pf-payout_email", "pay-"+c.lang+"@deals.example.org")
			aff.click(`#profile-form button[type=submit]`)
			aff.flashSays(w["saved"])
			aff.waitFor("the marks gone", `!document.querySelector('#profile-form [aria-invalid]') && document.getElementById('pf-website-error').hidden`)
			aff.open("/app/settings/profile")
			aff.waitFor("the saved profile", fmt.Sprintf(`document.getElementById('pf-payout_email').value === %q`, "pay-"+c.lang+"@deals.example.org"))
			if got := aff.text("#whoami"); !strings.Contains(got, name) {
				t.Errorf("the header after the rename says %q, want %q", got, name)
			}
			aff.screenshot("profile")

			// The affiliate applies to the brand's approval program.
			advID, affID := s.companyOf(t, advEmail), s.companyOf(t, affEmail)
			brand := programs.Actor{CompanyID: advID, Kind: identity.Advertiser, Role: "owner"}
			prog, err := s.prg.CreateProgram(ctx, brand, programs.ProgramInput{Name: "Boots " + c.lang, LandingURL: "https://shop.example/",
				Currency: "EUR", Commission: &programs.RuleInput{Type: "fixed", Amount: "5"}, Visibility: "approval"})
			if err != nil {
				t.Fatal(err)
			}
			ptn, _, err := s.prg.Apply(ctx, programs.Actor{CompanyID: affID, Kind: identity.Affiliate, Role: "owner"}, programs.ApplyInput{ProgramID: prog.ID})
			if err != nil {
				t.Fatal(err)
			}

			// The brand sees the applicant by name, and its profile.
			adv.open("/app/partnerships")
			adv.waitFor("the application by name", fmt.Sprintf(`document.querySelector('#partnerships').textContent.includes(%q)`, name))
			if got := adv.text("#partnerships"); strings.Contains(got, affID) {
				t.Errorf("the partnerships show the affiliate's id: %q", got)
			}
			adv.clickRow("#partnerships", name, w["profile"])
			adv.waitFor("the partner profile", `!document.getElementById('profile-section').hidden && document.activeElement.id === 'profile-title'`)
			got := adv.text("#profile-view")
			for _, want := range []string{name, "https://deals.example.org/" + c.lang, "40k newsletter", "pay-" + c.lang + "@deals.example.org"} {
				if !strings.Contains(got, want) {
					t.Errorf("the profile shows %q, want %q in it", got, want)
				}
			}
			adv.fitsViewport("#profile-view")
			adv.screenshot("partnerships-profile")

			// The affiliate sees the brand by name.
			aff.open("/app/partnerships")
			aff.waitFor("the brand by name", fmt.Sprintf(`document.querySelector('#partnerships').textContent.includes(%q)`, "Brand "+c.lang))

			// Approved, the affiliate is offered by name to be paid, and its links carry its name.
			if _, err := s.prg.SetPartnershipStatus(ctx, brand, ptn.ID, programs.Approved); err != nil {
				t.Fatal(err)
			}
			if _, err := s.lks.Create(ctx, affID, identity.Affiliate, links.NewLink{ProgramID: prog.ID}); err != nil {
				t.Fatal(err)
			}
			adv.open("/app/payouts")
			adv.waitFor("the affiliate offered by name", fmt.Sprintf(
				`[...document.querySelectorAll('#po-affiliate option')].some(o => o.textContent === %q && o.value === %q)`, name, affID))
			adv.open("/app/links")
			adv.waitFor("the link's affiliate by name", fmt.Sprintf(`document.querySelector('#links table') && document.querySelector('#links').textContent.includes(%q)`, name))
			adv.screenshot("links-affiliate")

			// On a 390 px phone the header and the profile still fit.
			for _, b := range []*browser{adv, aff} {
				b.run(emulation.SetDeviceMetricsOverride(390, 844, 1, true))
			}
			adv.open("/app/partnerships")
			adv.waitFor("the application by name", fmt.Sprintf(`document.querySelector('#partnerships').textContent.includes(%q)`, name))
			adv.checkHeader(advEmail, "Brand "+c.lang, w["owner"])
			adv.clickRow("#partnerships", name, w["profile"])
			adv.waitFor("the partner profile", `!document.getElementById('profile-section').hidden`)
			adv.fitsViewport("#profile-view")
			aff.open("/app/settings/profile")
			aff.waitFor("the saved profile", fmt.Sprintf(`document.getElementById('pf-display_name').value === %q`, name))
			aff.checkHeader(affEmail, name, w["owner"])
			aff.fitsViewport("#pf-audience")
			aff.screenshot("profile-phone")
		})
	}
}
