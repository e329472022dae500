package session

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzVerify feeds the token parser anything. It must not panic, and it must accept nothing
// but the one token we signed: any other accepted input would be a forgery.
func FuzzVerify(f *testing.F) {
	keys, err := ParseKeys(GenerateKeySpec())
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := newCodec(keys, func() time.Time { return now })
	s := Subject{UserID: "usr_1", CompanyID: "co_1", CompanyKind: "affiliate", Role: "member", Locale: "en"}
	sid := "ses_06f2d1x0k8m9q4r5s6t7v8w9xy"
	valid, _, err := c.sign(s, sid, now, now.Add(DefaultAccessTTL))
	if err != nil {
		f.Fatal(err)
	}
	if _, err := c.parse(valid); err != nil {
		f.Fatalf("the seed token does not verify: %v", err)
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "usr_1"})
	none.Header["kid"] = keys.IDs()[0]
	noneToken, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)

	f.Add(valid)
	f.Add(valid + "=")
	f.Add(strings.ToUpper(valid))
	f.Add(noneToken)
	f.Add("")
	f.Add("..")
	f.Add("eyJhbGciOiJIUzI1NiJ9.e30.")
	f.Add(`eyJhbGciOiJIUzI1NiIsImtpZCI6W119.e30.x`)
	f.Fuzz(func(t *testing.T, token string) {
		claims, err := c.parse(token)
		if err == nil && token != valid {
			t.Fatalf("accepted a token we did not sign: %q -> %+v", token, claims)
		}
	})
}
