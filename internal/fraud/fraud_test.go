package fraud_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/fraud"
)

func TestEmailsNormalise(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Jane.Doe+shop@GoogleMail.com", "janedoe@gmail.com"},
		{"j.a.n.e.doe@gmail.com", "janedoe@gmail.com"},
		{"Jane.Doe+x@Example.ORG", "jane.doe@example.org"},
		{" bob@shop.example ", "bob@shop.example"},
	}
	for _, c := range cases {
		e, ok := fraud.ParseEmail(c.in)
		if !ok || e.String() != c.want {
			t.Errorf("ParseEmail(%q) = %q, %v; want %q", c.in, e, ok, c.want)
		}
	}
	for _, bad := range []string{"", "bob", "Bob <bob@shop.example>", "bob@", "@shop.example", "bob@localhost", "a@b@c.example"} {
		if e, ok := fraud.ParseEmail(bad); ok {
			t.Errorf("ParseEmail(%q) = %q, want refused", bad, e)
		}
	}
}

func TestTheHashIsKeyedAndStable(t *testing.T) {
	a, _ := fraud.ParseEmail("Jane.Doe+1@gmail.com")
	b, _ := fraud.ParseEmail("janedoe@googlemail.com")
	k1, k2 := fraud.NewHasher([]byte("key one, thirty-two bytes long!!")), fraud.NewHasher([]byte("key two, thirty-two bytes long!!"))
	if !bytes.Equal(k1.Hash(a), k1.Hash(b)) || len(k1.Hash(a)) != 32 {
		t.Error("one person's addresses hash apart")
	}
	if bytes.Equal(k1.Hash(a), k2.Hash(a)) {
		t.Error("the hash does not depend on the key")
	}
}

func TestTheDisposableListIsEmbedded(t *testing.T) {
	if n := fraud.DisposableCount(); n < 1000 {
		t.Fatalf("the embedded list has %d domains", n)
	}
	for d, want := range map[string]bool{"mailinator.com": true, "x.y.mailinator.com": true, "gmail.com": false, "com": false, "example.org": false} {
		if got := fraud.Disposable(d, nil); got != want {
			t.Errorf("Disposable(%s) = %v", d, got)
		}
	}
	if !fraud.Disposable("temp.example", []string{"temp.example"}) {
		t.Error("a program's own domain is not disposable")
	}
}

func TestSettingsDefaultAndMerge(t *testing.T) {
	d := fraud.Defaults()
	if len(d) != len(fraud.Catalogue) || !d[fraud.ConversionTooFast].Enabled || d[fraud.ConversionTooFast].Seconds["min_seconds"] != 10 ||
		d[fraud.ConversionTooSlow].Enabled || d[fraud.SelfReferral].Action != fraud.ActionHold {
		t.Fatalf("defaults %+v", d)
	}
	// A stored setting without a parameter added later takes its default; a code since
	// removed from the catalogue is dropped.
	s, err := fraud.ParseStored([]byte(`{"conversion_too_fast": {"enabled": true, "action": "hold", "shadow": true}, "gone": {"enabled": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if st := s[fraud.ConversionTooFast]; st.Action != fraud.ActionHold || !st.Shadow || st.Seconds["min_seconds"] != 10 {
		t.Errorf("merged %+v", st)
	}
	if _, ok := s["gone"]; ok {
		t.Error("an unknown stored code survived")
	}
	// Decide with the stored settings: shadow findings are marked and never hold.
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	fs := fraud.Decide(s, nil, fraud.Facts{ClickedAt: now.Add(-3 * time.Second), OccurredAt: now}, now)
	if len(fs) != 1 || !fs[0].Shadow || fraud.Holds(fs) {
		t.Errorf("findings %+v", fs)
	}
}
