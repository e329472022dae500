package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// teamWords are what the people journey reads and clicks, per language.
var teamWords = map[string]map[string]string{
	"en": {"team": "Team", "invited": "Invitation sent to", "role_changed": "is now “Member”", "last_owner": "keeps at least one owner",
		"invite_affiliate": "Invite affiliate", "accept": "Accept", "accepted": "You are now a partner of", "approved": "Approved",
		"subject": "You are invited to", "aff_subject": "invites you to its affiliate program"},
	"es": {"team": "Equipo", "invited": "Invitación enviada a", "role_changed": "ahora es «Miembro»", "last_owner": "conserva al menos un propietario",
		"invite_affiliate": "Invitar afiliado", "accept": "Aceptar", "accepted": "Ya colaboras con", "approved": "Aprobada",
		"subject": "Te invitan a", "aff_subject": "te invita a su programa de afiliados"},
}

// signInInvited signs in on the login page with a magic code, without the sign-up form: the
// address was invited to a team.
func (b *browser) signInInvited(s *stack, email string) {
	b.t.Helper()
	b.open("/login")
	b.run(chromedp.SendKeys("#email", email, chromedp.ByQuery),
		chromedp.Click(`#request-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible("#code", chromedp.ByQuery))
	b.enterCode(s, email)
	b.waitFor("the overview after sign-in", `location.pathname === '/app'`)
}

// TestBrowserPeople walks the team and the invitations: a brand invites a colleague as
// admin, who joins at the first sign-in (on a phone), is made a member and loses the old
// session; the last owner cannot step down; the brand invites an affiliate to an
// invitation-only program, who signs up and accepts it.
func TestBrowserPeople(t *testing.T) {
	s := newStack(t, stackOptions{})
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			w := teamWords[lang]
			advEmail, colleague, affEmail := "team-"+lang+"@example.test", "colleague-"+lang+"@example.test", "invited-"+lang+"@example.test"
			adv := newBrowser(t, s.base, lang, 1280, 900)
			adv.signUp(s, advEmail, "advertiser", "Team brand "+lang)

			adv.open("/app/settings/team")
			if got := adv.text("h1"); got != w["team"] {
				t.Fatalf("team heading %q, want %q", got, w["team"])
			}
			adv.waitFor("the members", `document.querySelectorAll('#members tbody tr').length === 1 && document.querySelector('#invitations .empty')`)
			adv.fill("#invite-email", colleague)
			adv.run(chromedp.SetValue("#invite-role", "admin", chromedp.ByQuery))
			adv.click(`#invite-form button[type=submit]`)
			adv.flashSays(w["invited"])
			adv.waitFor("the pending invitation", fmt.Sprintf(`document.querySelector('#invitations').textContent.includes(%q)`, colleague))
			adv.screenshot("team")
			if msg := s.inbox.Wait(t, colleague, 10*time.Second); !strings.Contains(msg.Subject, w["subject"]) || !strings.Contains(msg.Subject, "Team brand "+lang) {
				t.Fatalf("the invitation e-mail's subject %q", msg.Subject)
			}

			// The colleague joins as admin on a phone, without the sign-up form.
			col := newBrowser(t, s.base, lang, 390, 844)
			col.signInInvited(s, colleague)
			col.open("/app/settings/team")
			col.waitFor("the team of two", `document.querySelectorAll('#members tbody tr').length === 2`)
			var ownerOffered bool
			col.eval(`!!document.querySelector('#invite-role option[value=owner]')`, &ownerOffered)
			if ownerOffered {
				t.Fatal("an admin is offered to invite owners")
			}
			var wide bool
			col.eval(`document.documentElement.scrollWidth > window.innerWidth`, &wide)
			if wide {
				t.Fatal("the team page scrolls sideways at 390 px")
			}

			// The owner makes the colleague a member: its session ends at once.
			adv.open("/app/settings/team")
			adv.waitFor("the role select", fmt.Sprintf(`[...document.querySelectorAll('#members tbody tr')].some(r => r.textContent.includes(%q) && r.querySelector('select'))`, colleague))
			var ok bool
			adv.eval(fmt.Sprintf(`(() => { const row = [...document.querySelectorAll('#members tbody tr')].find(r => r.textContent.includes(%q));
				const sel = row.querySelector('select'); sel.value = 'member'; sel.dispatchEvent(new Event('change')); return true; })()`, colleague), &ok)
			adv.flashSays(w["role_changed"])
			col.open("/app/settings/team")
			col.waitFor("the sign-in page", `location.pathname === '/login'`)

			// The last owner cannot step down.
			adv.eval(fmt.Sprintf(`(() => { const row = [...document.querySelectorAll('#members tbody tr')].find(r => r.textContent.includes(%q));
				const sel = row.querySelector('select'); sel.value = 'admin'; sel.dispatchEvent(new Event('change')); return true; })()`, advEmail), &ok)
			adv.flashSays(w["last_owner"])

			// The brand invites an affiliate to an invitation-only program.
			ctx := context.Background()
			prog, err := s.prg.CreateProgram(ctx, programs.Actor{CompanyID: s.companyOf(t, advEmail), Kind: identity.Advertiser, Role: "owner"},
				programs.ProgramInput{Name: "Invite only " + lang, LandingURL: "https://shop.example/", Currency: "EUR",
					Commission: &programs.RuleInput{Type: "percent", Percent: "10"}, Visibility: "approval"})
			if err != nil {
				t.Fatal(err)
			}
			adv.open("/app/programs")
			adv.clickRow("#programs", prog.Name, w["invite_affiliate"])
			adv.waitFor("the invite form", `!document.getElementById('invite-affiliate-section').hidden && document.querySelector('#affiliate-invitations .empty')`)
			adv.fill("#invite-affiliate-email", affEmail)
			adv.click(`#invite-affiliate-form button[type=submit]`)
			adv.waitFor("the pending affiliate invitation", fmt.Sprintf(`document.querySelector('#affiliate-invitations').textContent.includes(%q)`, affEmail))
			adv.screenshot("programs-invite")
			if msg := s.inbox.Wait(t, affEmail, 10*time.Second); !strings.Contains(msg.Subject, w["aff_subject"]) || !strings.Contains(msg.Text, prog.Name) {
				t.Fatalf("the affiliate's invitation e-mail: %q %q", msg.Subject, msg.Text)
			}

			aff := newBrowser(t, s.base, lang, 1280, 900)
			aff.signUp(s, affEmail, "affiliate", "Invited "+lang)
			aff.open("/app/programs")
			aff.waitFor("the invitation", fmt.Sprintf(`document.querySelector('#my-invitations') && document.querySelector('#my-invitations').textContent.includes(%q)`, prog.Name))
			aff.screenshot("programs-invited")
			aff.clickRow("#my-invitations", prog.Name, w["accept"])
			aff.flashSays(w["accepted"])
			aff.waitFor("the approved partnership", fmt.Sprintf(`(r => r && r.textContent.includes(%q))([...document.querySelectorAll('#programs .listing-card')].find(r => r.textContent.includes(%q)))`, w["approved"], prog.Name))
			var hidden bool
			aff.eval(`document.getElementById('my-invitations').closest('section').hidden`, &hidden)
			if !hidden {
				t.Fatal("the accepted invitation is still offered")
			}
			adv.open("/app/programs")
			adv.clickRow("#programs", prog.Name, w["invite_affiliate"])
			adv.waitFor("no pending invitation", `document.querySelector('#affiliate-invitations .empty')`)
		})
	}
}
