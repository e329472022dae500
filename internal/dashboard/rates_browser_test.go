package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// programFor makes a public 10 % program of the company in currency, the affiliate's approved
// partnership and link, and one click through the redirect; it returns the click id.
func (s *stack) programFor(t *testing.T, advertiserID, affiliateID, name, currency string) string {
	t.Helper()
	ctx := context.Background()
	prog, err := s.prg.CreateProgram(ctx, programs.Actor{CompanyID: advertiserID, Kind: identity.Advertiser, Role: "owner"},
		programs.ProgramInput{Name: name, LandingURL: "https://shop.example/", Currency: currency,
			Commission: &programs.RuleInput{Type: "percent", Percent: "10"}, Visibility: "public"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.prg.Apply(ctx, programs.Actor{CompanyID: affiliateID, Kind: identity.Affiliate, Role: "owner"}, programs.ApplyInput{ProgramID: prog.ID}); err != nil {
		t.Fatal(err)
	}
	link, err := s.lks.Create(ctx, affiliateID, identity.Affiliate, links.NewLink{ProgramID: prog.ID})
	if err != nil {
		t.Fatal(err)
	}
	return s.click(t, link.Code)
}

// convert registers a sale with the advertiser's key once the click has reached ClickHouse.
func (s *stack) convert(t *testing.T, key, clickID, order, amount, currency string) string {
	t.Helper()
	var body string
	s.eventually(t, "the conversion "+order, func() (bool, string) {
		status, b := s.call(t, "POST", "/api/v1/conversions", key, fmt.Sprintf(`{"click_id":%q,"external_id":%q,"amount":%q,"currency":%q}`,
			clickID, order, amount, currency))
		body = b
		return status == 201 || status == 200, fmt.Sprintf("%d %s", status, b)
	})
	return body
}

func (s *stack) companyOf(t *testing.T, email string) string {
	t.Helper()
	u, err := s.ids.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.CompanyID
}

// The rates page keeps rates (one by hand, a CSV upload refused whole for a bad line, then one
// taken), a sale in USD to a EUR program shows both amounts on the conversions page, and an
// affiliate earning in EUR and USD sees its overview with a currency switch.
func TestBrowserRatesAndCurrencies(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := context.Background()
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			advEmail, affEmail := "rates-"+lang+"@example.test", "earner-"+lang+"@example.test"
			adv := newBrowser(t, s.base, lang, 1280, 900)
			adv.signUp(s, advEmail, "advertiser", "Rates "+lang)
			today := time.Now().UTC().Format(time.DateOnly)

			adv.open("/app/settings/rates")
			adv.waitFor("the empty rate list", `document.querySelector('#rates .empty')`)
			adv.screenshot("rates")
			adv.setValue("#r-base", "USD")
			adv.setValue("#r-quote", "EUR")
			adv.fill("#r-rate", "0.9172")
			adv.click(`#rate-form button[type=submit]`)
			adv.waitFor("the rate in the list", `document.querySelector('#rates').textContent.includes('USD/EUR') && document.querySelector('#rates').textContent.includes('0.9172')`)

			dir := t.TempDir()
			bad := filepath.Join(dir, "bad.csv")
			good := filepath.Join(dir, "good.csv")
			if err := os.WriteFile(bad, []byte("date,base,quote,rate\n"+today+",GBP,EUR,1.17\n"+today+",GBP,EUR,abc\n2026-13-01,GBP,EUR,1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(good, []byte("date,base,quote,rate\n"+today+",GBP,EUR,1.17\n"+today+",CHF,EUR,1.04\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			adv.run(chromedp.SetUploadFiles("#r-file", []string{bad}, chromedp.ByQuery))
			adv.click(`#upload-form button[type=submit]`)
			adv.waitFor("the refused lines", `!document.getElementById('upload-errors').hidden && document.querySelectorAll('#upload-errors li').length === 2`)
			if got := adv.text("#upload-errors"); !strings.Contains(got, "3") || !strings.Contains(got, "4") {
				t.Fatalf("refused lines %q", got)
			}
			adv.screenshot("rates-refused")
			if n := adv.count(`#rates tbody tr`); n != 1 {
				t.Fatalf("a refused upload left %d rates listed", n)
			}
			adv.run(chromedp.SetUploadFiles("#r-file", []string{good}, chromedp.ByQuery))
			adv.click(`#upload-form button[type=submit]`)
			adv.waitFor("the uploaded rates", `document.querySelectorAll('#rates tbody tr').length === 3 && document.getElementById('upload-errors').hidden`)

			// A sale in USD to the advertiser's EUR program is converted with the rate.
			advID := s.companyOf(t, advEmail)
			key, _, err := s.ids.CreateAPIKey(ctx, advID, "server")
			if err != nil {
				t.Fatal(err)
			}
			aff := newBrowser(t, s.base, lang, 1280, 900)
			aff.signUp(s, affEmail, "affiliate", "Earner "+lang)
			affID := s.companyOf(t, affEmail)
			if body := s.convert(t, key, s.programFor(t, advID, affID, "Euro shop "+lang, "EUR"), "usd-order", "100.00", "USD"); !strings.Contains(body, `"amount":"91.72"`) {
				t.Fatalf("the converted sale: %s", body)
			}
			adv.open("/app/conversions")
			adv.waitFor("the original amount and rate", `(c => c && c.textContent.includes('0.9172'))(document.querySelector('#conversions .sub'))`)
			adv.screenshot("conversions-converted")

			// The affiliate also earns in USD at another advertiser: its overview offers both
			// currencies and never sums them.
			other, _, err := s.ids.CreateCompany(ctx, identity.NewCompany{Kind: identity.Advertiser, Name: "Dollar shop", OwnerEmail: "dollar-" + lang + "@example.test"})
			if err != nil {
				t.Fatal(err)
			}
			otherKey, _, err := s.ids.CreateAPIKey(ctx, other.ID, "server")
			if err != nil {
				t.Fatal(err)
			}
			s.convert(t, otherKey, s.programFor(t, other.ID, affID, "Dollar shop "+lang, "USD"), "usd-sale", "50.00", "USD")
			deadline := time.Now().Add(30 * time.Second)
			for {
				aff.open("/app")
				aff.waitFor("the commission chart", `document.querySelector('#chart-commission svg')`)
				var n int
				aff.eval(`document.querySelectorAll('#currency option').length`, &n)
				if n == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the overview offers %d currencies, want EUR and USD", n)
				}
				time.Sleep(300 * time.Millisecond)
			}
			var state string
			aff.eval(`JSON.stringify([!document.getElementById('currency-field').hidden, document.getElementById('currency').value,
				document.querySelector('#chart-commission .plot').dataset.totalCommission, document.querySelector('#chart-conversions .plot').dataset.totalPending])`, &state)
			if state != `[true,"EUR","9.17","2"]` {
				t.Fatalf("the overview in EUR: %s", state)
			}
			aff.screenshot("overview-currencies")
			aff.eval(`(s => { s.value = 'USD'; s.dispatchEvent(new Event('change')); return true; })(document.getElementById('currency'))`, new(bool))
			aff.waitFor("the commission in USD", `document.querySelector('#chart-commission .plot').dataset.totalCommission === '5'`)
			if got := aff.text(`[data-total="commission"]`); !strings.Contains(got, "5") || strings.Contains(got, "€") {
				t.Fatalf("the commission total in USD reads %q", got)
			}
		})
	}
}
