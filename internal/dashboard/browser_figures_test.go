package dashboard_test

import (
	"fmt"
	"testing"
	"time"
)

// An affiliate's links show their last 30 days (clicks, conversions, earnings), and the
// brand's overview ranks its partners by commission.
func TestBrowserLinkFiguresAndPartnerLeaderboard(t *testing.T) {
	s := newStack(t, stackOptions{})
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			advEmail, affEmail := "leader-"+lang+"@example.test", "ranked-"+lang+"@example.test"
			brand := newBrowser(t, s.base, lang, 1280, 900)
			brand.signUp(s, advEmail, "advertiser", "Leader "+lang)
			key := brand.createAPIKey("figures " + lang)
			aff := newBrowser(t, s.base, lang, 1280, 900)
			aff.signUp(s, affEmail, "affiliate", "Ranked "+lang)
			clickID := s.programFor(t, s.companyOf(t, advEmail), s.companyOf(t, affEmail), "Figures "+lang, "EUR")
			s.convert(t, key, clickID, "fig-"+lang, "200.00", "EUR")
			affID := s.companyOf(t, affEmail)

			// The affiliate's link: its click, its conversion, 10 % of 200.00 EUR.
			s.eventually(t, "the link's figures", func() (bool, string) {
				aff.open("/app/links")
				aff.waitFor("the links", `document.querySelector('#links tbody tr')`)
				var cells []string
				aff.eval(`[...document.querySelectorAll('#links tbody tr td.num')].map(td => td.textContent)`, &cells)
				return len(cells) == 3 && cells[0] == "1" && cells[1] == "1" && containsDigits(cells[2], "2000"), fmt.Sprint(cells)
			})
			aff.screenshot("links-figures")

			// The brand's leaderboard names the affiliate first, with its commission.
			s.eventually(t, "the leaderboard", func() (bool, string) {
				brand.open("/app")
				brand.waitFor("the charts", `document.querySelector('#chart-clicks svg')`)
				// The leaderboard is drawn after the charts, once its own two requests answer: a
				// loaded machine can take longer than reading it right away would allow.
				var row []string
				for drawn := time.Now().Add(10 * time.Second); len(row) == 0 && time.Now().Before(drawn); time.Sleep(100 * time.Millisecond) {
					brand.eval(`(r => r ? [...r.querySelectorAll('td')].map(td => td.textContent) : [])(document.querySelector('#leaders tbody tr'))`, &row)
				}
				return len(row) == 6 && row[0] == "1" && (row[1] == affID || row[1] == "Ranked "+lang) && row[2] == "1" && row[3] == "1" &&
					containsDigits(row[4], "2000"), fmt.Sprint(row)
			})
			brand.screenshot("overview-leaders")
		})
	}
}

// containsDigits reports whether the digits of s, separators dropped, are want: "€20.00" and
// "20,00 €" are both "2000".
func containsDigits(s, want string) bool {
	var d []rune
	for _, r := range s {
		if r >= '0' && r <= '9' {
			d = append(d, r)
		}
	}
	return string(d) == want
}
