package dashboard_test

import (
	"testing"
)

// sendTestWords are the "Send test" button and its message, per language.
var sendTestWords = map[string]map[string]string{
	"en": {"send": "Send test", "ok": "Test sent: the receiver answered 204", "saved": "Postback URL saved."},
	"es": {"send": "Enviar prueba", "ok": "Prueba enviada: el receptor respondió 204", "saved": "URL de postback guardada."},
}

// TestBrowserPostbackSendTest sets a postback URL with placeholders and sends a test from its
// page: one signed sample reaches the receiver, and the page says what it answered.
func TestBrowserPostbackSendTest(t *testing.T) {
	s := newStack(t, stackOptions{})
	for _, lang := range []string{"en", "es"} {
		t.Run("in "+lang, func(t *testing.T) {
			w := sendTestWords[lang]
			b := newBrowser(t, s.base, lang, 1280, 900)
			b.signUp(s, "pb-test-"+lang+"@example.test", "advertiser", "Postback test "+lang)
			rcv := newReceiver(t)
			b.open("/app/settings/postbacks")
			b.waitFor("the settings", `document.getElementById('pb-secret-info').textContent !== ''`)
			if !b.disabled("#pb-test") {
				t.Fatal("Send test is offered before a postback URL is set")
			}
			b.fill("#pb-url", rcv.url+"/pb?cid={click_id}&amount={amount}&status={status}")
			b.click(`#postback-form button[type=submit]`)
			b.flashSays(w["saved"])
			b.waitFor("Send test enabled", `!document.getElementById('pb-test').disabled`)
			b.click("#pb-test")
			b.flashSays(w["ok"])
			if rcv.count() != 1 {
				t.Fatalf("the receiver got %d requests, want 1", rcv.count())
			}
		})
	}
}

func (b *browser) disabled(sel string) bool {
	var d bool
	b.eval(`document.querySelector('`+sel+`').disabled`, &d)
	return d
}
