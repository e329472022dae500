package dashboard_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
)

// listingWords are the texts the listing journey checks, per language.
var listingWords = map[string]map[string]string{
	"en": {"by": "by Trail Co", "fashion": "Fashion", "no_match": "No programs match your search.", "required": "This question needs an answer.",
		"question": "Where will you promote us?", "test": "Test"},
	"es": {"by": "de Trail Co", "fashion": "Moda", "no_match": "Ningún programa coincide con tu búsqueda.", "required": "Esta pregunta necesita una respuesta.",
		"question": "Where will you promote us?", "test": "Prueba"},
}

// TestBrowserListingAndOnboarding walks a new brand through its first steps (a program with
// a question, the tracking instructions with a key made on the spot, a test conversion from
// the dashboard and one from its "server" with that key) and an affiliate through the
// listing: search, join an open program, and apply to an invitation-only one answering its
// question, which the brand then reads.
func TestBrowserListingAndOnboarding(t *testing.T) {
	s := newStack(t, stackOptions{})
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			w := listingWords[lang]
			adv := newBrowser(t, s.base, lang, 1280, 900)
			adv.signUp(s, "trail-"+lang+"@example.test", "advertiser", "Trail Co "+lang)
			adv.waitFor("the four first steps, none done", `document.querySelectorAll('#onboarding:not([hidden]) .steps > li').length === 4
				&& !document.querySelector('#onboarding .steps > li.done')`)
			adv.screenshot("onboarding")
			adv.click(`#onboarding a[href="/app/programs"]`)

			// An invitation-only program with a listing and a required question.
			secret := "Trail shoes " + lang
			adv.waitFor("the program form", `document.getElementById('p-name')`)
			adv.fill("#p-name", secret)
			adv.fill("#p-landing", "https://trail.example/shoes")
			adv.fill("#p-value", "10")
			adv.fill("#p-about", "Handmade shoes for mountain runners.")
			adv.fill("#p-website", "https://trail.example")
			adv.fill("#p-terms", "No brand bidding.")
			adv.fill("#p-q1", w["question"])
			var ignored bool
			// Invitation-only: out of the directory, which the form ticks for a new program.
			adv.eval(`(document.querySelector('input[name=categories][value=fashion]').click(),
				document.querySelectorAll('input[name=question_required]')[0].click(),
				document.getElementById('p-listed').checked && document.getElementById('p-listed').click(), true)`, &ignored)
			adv.click(`#program-form button[type=submit]`)
			adv.waitFor("the new program's tracking instructions, focused", fmt.Sprintf(`(g => g && g.dataset.program.startsWith('prg_')
				&& document.getElementById('tracking-of').textContent === %q && document.activeElement.id === 'tracking-title'
				&& document.querySelector('code[id^="ex-curl-"]').textContent.includes(g.dataset.program))(document.querySelector('#tracking .tracking-guide'))`, secret))
			var secretID string
			adv.eval(`document.querySelector('#tracking .tracking-guide').dataset.program`, &secretID)

			// An open program, without questions.
			open := "Open trails " + lang
			adv.fill("#p-name", open)
			adv.fill("#p-landing", "https://trail.example/open")
			adv.fill("#p-value", "5")
			adv.eval(`(document.getElementById('p-visibility').value = 'public', document.querySelector('input[name=categories][value=travel]').click(), true)`, &ignored)
			adv.click(`#program-form button[type=submit]`)
			adv.waitFor("the second program", fmt.Sprintf(`document.getElementById('tracking-of').textContent === %q`, open))
			var openID string
			adv.eval(`document.querySelector('#tracking .tracking-guide').dataset.program`, &openID)
			adv.screenshot("programs-tracking")

			// The first steps: a key made on the spot lands in the examples; a test
			// conversion from the dashboard shows its result and stays out of the figures.
			adv.open("/app")
			adv.waitFor("the program step done", `document.querySelector('#onboarding .steps > li.done') && document.getElementById('make-key')`)
			adv.click("#make-key")
			adv.waitFor("the key in the conversion example", `/x-api-key: ps_/.test(document.querySelector('code[id^="ex-curl-"]').textContent)`)
			var key string
			adv.eval(`document.querySelector('code[id^="ex-test-"]').textContent.match(/x-api-key: (\S+)"/)[1]`, &key)
			adv.click("#send-test")
			adv.waitFor("the test conversion's result, focused", fmt.Sprintf(`(r => r && r.textContent.includes('tcv_') && r.querySelector('.badge.test').textContent === %q
				&& document.activeElement === r)(document.getElementById('test-result'))`, w["test"]))
			adv.waitFor("the totals", `document.querySelector('[data-total=conversions]').textContent !== '–'`)
			var conversions string
			adv.eval(`document.querySelector('[data-total=conversions]').textContent`, &conversions)
			if conversions != "0" {
				t.Fatalf("a test conversion shows in the totals: %q conversions", conversions)
			}
			// The brand's server sends one with the key from the example: tracking is done.
			if status, body := s.call(t, "POST", "/api/v1/conversions/test", key,
				fmt.Sprintf(`{"program_id":%q,"external_id":"server-test","amount":"80.00"}`, secretID)); status != 201 || !strings.Contains(body, `"test":true`) {
				t.Fatalf("the example's test conversion: %d %s", status, body)
			}
			adv.open("/app")
			adv.waitFor("three steps done", `document.querySelectorAll('#onboarding .steps > li.done').length === 3`)
			var joinLink string
			adv.eval(`document.querySelector('code[id^="ex-join-"]').textContent`, &joinLink)
			// The examples are of the newest program.
			if want := s.base + "/app/programs?program=" + openID; joinLink != want {
				t.Fatalf("join link %q, want %q", joinLink, want)
			}

			// The affiliate finds the open program, not the invitation-only one.
			aff := newBrowser(t, s.base, lang, 1280, 900)
			aff.signUp(s, "runner-"+lang+"@example.test", "affiliate", "Runner blog "+lang)
			aff.open("/app/programs")
			aff.fill("#s-q", "open trails "+lang)
			aff.click(`#search-form button[type=submit]`)
			aff.waitFor("the open program alone", fmt.Sprintf(`(c => c.length === 1 && c[0].textContent.includes(%q) && c[0].textContent.includes(%q))
				(document.querySelectorAll('#programs .listing-card'))`, open, w["by"]))
			aff.fill("#s-q", "")
			aff.eval(`(document.getElementById('s-category').value = 'fashion', true)`, &ignored)
			aff.click(`#search-form button[type=submit]`)
			aff.waitFor("no public fashion program", fmt.Sprintf(`document.querySelector('#programs .empty') && document.querySelector('#programs .empty').textContent === %q`, w["no_match"]))
			aff.eval(`(document.getElementById('s-category').value = '', true)`, &ignored)
			aff.click(`#search-form button[type=submit]`)
			aff.waitFor("the open program's Join", fmt.Sprintf(`[...document.querySelectorAll('#programs .listing-card')].some(c => c.textContent.includes(%q) && c.querySelector('button.apply'))`, open))
			aff.eval(fmt.Sprintf(`([...document.querySelectorAll('#programs .listing-card')].find(c => c.textContent.includes(%q)).querySelector('button.apply').click(), true)`, open), &ignored)
			aff.waitFor("joined at once, the keyboard on the card", fmt.Sprintf(`(c => c && c.querySelector('.badge.approved') && document.activeElement === c.querySelector('h3'))
				([...document.querySelectorAll('#programs .listing-card')].find(c => c.textContent.includes(%q)))`, open))

			// The invitation-only program through the brand's join link: its listing, then
			// Apply with the answer.
			aff.open(strings.Replace(strings.TrimPrefix(joinLink, s.base), openID, secretID, 1))
			card := fmt.Sprintf(`document.querySelector('#programs .listing-card[data-id=%q]')`, secretID)
			aff.waitFor("the invited program's listing", fmt.Sprintf(`(c => c && c.textContent.includes('trail.example') && c.textContent.includes(%q)
				&& c.textContent.includes('No brand bidding.') && c.textContent.includes(%q))(%s)`, w["fashion"], w["by"], card))
			aff.screenshot("programs-listing")
			aff.click(fmt.Sprintf(`#programs .listing-card[data-id=%q] button.apply`, secretID))
			aff.waitFor("the question, focused", fmt.Sprintf(`(c => document.activeElement === c.querySelector('textarea[name=answer]'))(%s)`, card))
			aff.click(fmt.Sprintf(`#programs .listing-card[data-id=%q] .apply-answers button[type=submit]`, secretID))
			aff.waitFor("the unanswered question marked", fmt.Sprintf(`(a => a.getAttribute('aria-invalid') === 'true' && document.getElementById(a.getAttribute('aria-describedby')).textContent === %q)
				(%s.querySelector('textarea[name=answer]'))`, w["required"], card))
			aff.fill(fmt.Sprintf(`#programs .listing-card[data-id=%q] textarea[name=answer]`, secretID), "On my trail running blog")
			aff.click(fmt.Sprintf(`#programs .listing-card[data-id=%q] .apply-answers button[type=submit]`, secretID))
			aff.waitFor("the pending application", fmt.Sprintf(`%s.querySelector('.badge.pending')`, card))

			// Both fit a phone.
			adv.fitsPhone(390, 844, "/app", "/app/programs")
			aff.fitsPhone(390, 844, "/app", "/app/programs")

			// The brand reads the answer with the application; every step is done, so the
			// overview goes back to the figures alone.
			adv.open("/app/partnerships")
			adv.waitFor("the answer on the application", fmt.Sprintf(`[...document.querySelectorAll('#partnerships tbody tr')].some(r => r.textContent.includes(%q)
				&& r.textContent.includes('On my trail running blog') && r.textContent.includes(%q))`, secret, w["question"]))
			adv.open("/app")
			adv.waitFor("the charts", `document.querySelector('#chart-clicks svg')`)
			adv.waitFor("the first steps gone", `(o => o.dataset.state === 'done' && o.hidden)(document.getElementById('onboarding'))`)
		})
	}
}

// fitsPhone opens each path on a phone's viewport and fails for any page that scrolls
// sideways.
func (b *browser) fitsPhone(width, height int, paths ...string) {
	b.t.Helper()
	b.run(emulation.SetDeviceMetricsOverride(int64(width), int64(height), 1, true))
	for _, p := range paths {
		b.open(p)
		b.waitFor("the page's data on "+p, `!document.querySelector('[aria-busy="true"]')`)
		var overflow int
		b.eval(`document.documentElement.scrollWidth - window.innerWidth`, &overflow)
		if overflow > 0 {
			b.t.Errorf("%s is %d px wider than a %d px phone", p, overflow, width)
		}
	}
	b.run(emulation.ClearDeviceMetricsOverride())
}
