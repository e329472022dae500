package auth

import (
	"bytes"
	"strings"
	"testing"
)

func TestNewKeyParsesAndHashesToItsStoredForm(t *testing.T) {
	key, display, hash := NewKey()
	if _, err := ParseKey(key); err != nil {
		t.Fatalf("a new key does not parse: %v", err)
	}
	if !strings.HasPrefix(key, display) || len(display) >= len(key)/2 {
		t.Fatalf("display prefix %q reveals too much of %q", display, key)
	}
	if !bytes.Equal(hash, HashKey(key)) {
		t.Fatal("hash is not the stored form of the key")
	}
	other, _, _ := NewKey()
	if other == key {
		t.Fatal("two keys are equal")
	}
}

func TestParseKeyRefusesWhatCannotBeAKey(t *testing.T) {
	key, _, _ := NewKey()
	for name, s := range map[string]string{
		"empty":             "",
		"no prefix":         "xx_" + key[3:],
		"too short":         key[:len(key)-1],
		"too long":          key + "a",
		"a non-base62 byte": key[:len(key)-1] + "-",
		"a multi-byte rune": key[:len(key)-2] + "é",
		"a bearer jwt-ish":  "eyJhbGciOiJIUzI1NiJ9.e30.abc",
	} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("%s: ParseKey(%q) accepted it", name, s)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	key, _, _ := NewKey()
	f.Add(key)
	f.Add("ps_")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseKey(s)
		if err == nil && (got != s || len(s) != keyLen) {
			t.Fatalf("ParseKey(%q) = %q", s, got)
		}
	})
}

func TestPublishableAndSecretKeysNeverParseAsEachOther(t *testing.T) {
	pk, display, hash := NewPublishableKey()
	if _, err := ParsePublishableKey(pk); err != nil {
		t.Fatalf("a new publishable key does not parse: %v", err)
	}
	if !strings.HasPrefix(pk, PublishableKeyPrefix) || !strings.HasPrefix(pk, display) || !bytes.Equal(hash, HashKey(pk)) {
		t.Fatalf("publishable key %q, display %q", pk, display)
	}
	if _, err := ParseKey(pk); err == nil {
		t.Fatal("a publishable key parses as a secret key")
	}
	sk, _, _ := NewKey()
	if _, err := ParsePublishableKey(sk); err == nil {
		t.Fatal("a secret key parses as a publishable key")
	}
	if _, err := ParsePublishableKey(pk[:len(pk)-1] + "-"); err == nil {
		t.Fatal("a publishable key with a non-base62 byte parses")
	}
}
