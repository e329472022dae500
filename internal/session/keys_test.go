package session

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseKeysAcceptsAListWhoseFirstKeySigns(t *testing.T) {
	a, b := GenerateKeySpec(), GenerateKeySpec()
	keys, err := ParseKeys(" " + a + " ,\n" + b + ",")
	if err != nil {
		t.Fatalf("ParseKeys: %v", err)
	}
	aKid, _, _ := strings.Cut(a, ":")
	bKid, _, _ := strings.Cut(b, ":")
	if ids := keys.IDs(); len(ids) != 2 || ids[0] != aKid || ids[1] != bKid {
		t.Fatalf("key ids %v, want [%s %s]", ids, aKid, bKid)
	}
	if keys.signing().id != aKid {
		t.Fatalf("signing key %s, want the first, %s", keys.signing().id, aKid)
	}
}

func TestParseKeysRefusesWeakOrMalformedSpecs(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(make([]byte, MinKeyBytes))
	for _, tc := range []struct{ name, spec string }{
		{"an empty spec", ""},
		{"only separators", " , ,"},
		{"an entry without a kid", good},
		{"an empty kid", ":" + good},
		{"a kid with a space", "a b:" + good},
		{"a kid with a quote", `a"b:` + good},
		{"a kid over 64 characters", strings.Repeat("k", 65) + ":" + good},
		{"a key that is not base64", "k1:not base64!"},
		{"a key in base64url", "k1:" + base64.URLEncoding.EncodeToString(append(make([]byte, MinKeyBytes-1), 0xff, 0xff))},
		{"a key of 31 bytes", "k1:" + base64.StdEncoding.EncodeToString(make([]byte, MinKeyBytes-1))},
		{"an empty key", "k1:"},
		{"the same kid twice", "k1:" + good + ",k1:" + good},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseKeys(tc.spec); err == nil {
				t.Fatalf("ParseKeys(%q) accepted it", tc.spec)
			}
		})
	}
}

func TestKeysNeverPrintTheirSecrets(t *testing.T) {
	spec := GenerateKeySpec()
	_, secret, _ := strings.Cut(spec, ":")
	keys, err := ParseKeys(spec)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	slog.New(slog.NewTextHandler(&log, nil)).Info("loaded", "keys", keys)
	for _, out := range []string{fmt.Sprint(keys), fmt.Sprintf("%+v %#v %x %s", keys, keys, keys, keys), log.String()} {
		if !strings.Contains(out, keys.IDs()[0]) {
			t.Errorf("%q does not name the key id", out)
		}
		raw, _ := base64.StdEncoding.DecodeString(secret)
		if strings.Contains(out, secret) || strings.Contains(out, fmt.Sprintf("%x", raw)) || strings.Contains(out, fmt.Sprint(raw)) {
			t.Errorf("%q shows the secret", out)
		}
	}
}

func TestGenerateKeySpecMakesDistinctUsableKeys(t *testing.T) {
	a, b := GenerateKeySpec(), GenerateKeySpec()
	if a == b {
		t.Fatal("two generated specs are equal")
	}
	if _, err := ParseKeys(a); err != nil {
		t.Fatalf("a generated spec does not parse: %v", err)
	}
}
