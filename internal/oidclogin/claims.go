package oidclogin

import (
	"encoding/json"
	"fmt"
	"strings"
)

// claims are the ID token claims an Identity is made of.
type claims struct {
	Email         string       `json:"email"`
	EmailVerified verifiedFlag `json:"email_verified"`
	Name          string       `json:"name"`
	GivenName     string       `json:"given_name"`
	FamilyName    string       `json:"family_name"`
	Locale        locale       `json:"locale"`
}

func (c claims) identity(provider, subject string) (Identity, error) {
	email := strings.ToLower(strings.TrimSpace(c.Email))
	if email == "" || !c.EmailVerified {
		// The address stays out of the error, which may be logged.
		return Identity{}, fmt.Errorf("%w: %s: email present %t, email_verified %t", ErrEmailNotVerified, provider, email != "", bool(c.EmailVerified))
	}
	name := c.Name
	if name == "" {
		name = strings.TrimSpace(c.GivenName + " " + c.FamilyName)
	}
	return Identity{Provider: provider, Subject: subject, Email: email, Name: name, Locale: string(c.Locale)}, nil
}

// verifiedFlag reads email_verified as Google sends it (true) and as LinkedIn may ("true").
// Anything else, including a missing claim, is not verified: it never fails the decoding, so
// an odd value is refused as unverified rather than as a broken token.
type verifiedFlag bool

func (v *verifiedFlag) UnmarshalJSON(b []byte) error {
	var s string
	switch {
	case string(b) == "true":
		*v = true
	case json.Unmarshal(b, &s) == nil:
		*v = verifiedFlag(strings.EqualFold(s, "true"))
	default:
		*v = false
	}
	return nil
}

// locale reads the claim as a BCP 47 string ("en-US"), and also as LinkedIn's object
// {"language": "en", "country": "US"}. An unreadable locale is left empty: it is no reason to
// refuse a login.
type locale string

func (l *locale) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*l = locale(s)
		return nil
	}
	var o struct {
		Language string `json:"language"`
		Country  string `json:"country"`
	}
	*l = ""
	if json.Unmarshal(b, &o) == nil && o.Language != "" {
		*l = locale(o.Language)
		if o.Country != "" {
			*l += locale("-" + o.Country)
		}
	}
	return nil
}
