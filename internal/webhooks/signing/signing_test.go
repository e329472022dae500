package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
)

func TestNewSecretIsAStandardWebhooksSecret(t *testing.T) {
	s := NewSecret()
	if !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("%q does not start with whsec_", s[:6])
	}
	key, err := Key(s)
	if err != nil || len(key) != 32 {
		t.Fatalf("key of %d bytes, %v; want 32", len(key), err)
	}
	if NewSecret() == s {
		t.Error("two secrets are equal")
	}
	// The Standard Webhooks reference example: the key is the decoded bytes after whsec_.
	key, err = Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}"))
	if got := base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Errorf("signature %s differs from the Standard Webhooks example", got)
	}
}

func TestKeyRefusesMalformedSecrets(t *testing.T) {
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 8))} {
		if _, err := Key(s); err == nil {
			t.Errorf("Key(%q) accepted", s)
		}
	}
	if _, err := Key("whsec_hunter2hunter2hunter2!!"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error must not quote the secret: %v", err)
	}
}

func TestRotateAndExpiry(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	k := Keys{Current: NewSecret()}

	r := k.Rotate(now, time.Hour)
	if r.Current == k.Current || r.Previous != k.Current || !r.PreviousExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("rotate: %+v", r)
	}
	if !r.PreviousValid(now.Add(time.Hour-time.Second)) || r.PreviousValid(now.Add(time.Hour)) {
		t.Error("the previous secret must sign until, and not at, its expiry")
	}
	if again := r.Rotate(now, time.Hour); again.Previous != r.Current {
		t.Error("a second rotation keeps only the secret it replaces")
	}
	if leaked := k.Rotate(now, 0); leaked.Previous != "" {
		t.Error("grace 0 keeps no previous secret")
	}

	back, err := FromData(r.Data())
	if err != nil || back != r {
		t.Errorf("Data/FromData round trip: %+v, %v", back, err)
	}
}

func TestFromData(t *testing.T) {
	cur, prev := NewSecret(), NewSecret()
	tests := []struct {
		name         string
		data         map[string]string
		wantErr      bool
		wantPrevious bool
	}{
		{"current only", map[string]string{v1alpha1.SecretKeyCurrent: cur}, false, false},
		{"current and previous", map[string]string{v1alpha1.SecretKeyCurrent: cur, v1alpha1.SecretKeyPrevious: prev,
			v1alpha1.SecretKeyPreviousExpiresAt: "2026-03-01T12:00:00Z"}, false, true},
		{"a previous without expiry is dropped", map[string]string{v1alpha1.SecretKeyCurrent: cur, v1alpha1.SecretKeyPrevious: prev}, false, false},
		{"a malformed previous is dropped", map[string]string{v1alpha1.SecretKeyCurrent: cur, v1alpha1.SecretKeyPrevious: "nope",
			v1alpha1.SecretKeyPreviousExpiresAt: "2026-03-01T12:00:00Z"}, false, false},
		{"no current is an error", map[string]string{v1alpha1.SecretKeyPrevious: prev}, true, false},
		{"a malformed current is an error", map[string]string{v1alpha1.SecretKeyCurrent: "whsec_x"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tt.data {
				data[k] = []byte(v)
			}
			k, err := FromData(data)
			if (err != nil) != tt.wantErr || (k.Previous != "") != tt.wantPrevious {
				t.Errorf("got %+v, %v", k, err)
			}
		})
	}
}

// The keys of a rotation sign in order, the previous one until, not at, its expiry; a
// previous secret that cannot sign is dropped, a current one that cannot is an error.
func TestHMACKeysAndLive(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	k := Keys{Current: NewSecret()}.Rotate(now, time.Hour)
	all, err := k.HMACKeys()
	if err != nil || len(all) != 2 || !all[0].ExpiresAt.IsZero() || !all[1].ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("HMACKeys = %+v, %v", all, err)
	}
	if cur, _ := Key(k.Current); string(all[0].Key) != string(cur) {
		t.Error("the current key is not first")
	}
	if live := Live(all, now.Add(time.Hour-time.Second)); len(live) != 2 {
		t.Errorf("%d keys sign during the grace period, want 2", len(live))
	}
	if live := Live(all, now.Add(time.Hour)); len(live) != 1 || string(live[0].Key) != string(all[0].Key) {
		t.Errorf("at its expiry the keys that sign are %+v, want the current one", live)
	}
	// An expired key first (no source lists one so) does not hide a live one after it.
	if live := Live([]HMACKey{all[1], all[0]}, now.Add(2*time.Hour)); len(live) != 1 || string(live[0].Key) != string(all[0].Key) {
		t.Errorf("live %+v", live)
	}

	for name, bad := range map[string]Keys{
		"a malformed previous":      {Current: k.Current, Previous: "whsec_x", PreviousExpiresAt: now},
		"a previous without expiry": {Current: k.Current, Previous: k.Previous},
	} {
		if got, err := bad.HMACKeys(); err != nil || len(got) != 1 {
			t.Errorf("%s: %d keys, %v; want the current one", name, len(got), err)
		}
	}
	if _, err := (Keys{Current: "whsec_x"}).HMACKeys(); !errors.Is(err, ErrNoCurrent) {
		t.Errorf("a malformed current key: %v, want ErrNoCurrent", err)
	}
}
