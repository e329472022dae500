package fraud

import (
	"crypto/hmac"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"net/mail"
	"strings"
	"sync"
)

// MaxEmail is the longest customer e-mail address accepted (RFC 5321's path limit).
const MaxEmail = 254

// Email is a normalised e-mail address: one person's addresses compare equal however they
// are written. Lower case; the local part loses any "+tag"; a Gmail address loses its dots
// and googlemail.com becomes gmail.com.
type Email struct{ Local, Domain string }

// String is the normalised address.
func (e Email) String() string { return e.Local + "@" + e.Domain }

// ParseEmail reads and normalises an address; ok is false for anything that is not one plain
// address (no display name, no comments).
func ParseEmail(s string) (Email, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > MaxEmail {
		return Email{}, false
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return Email{}, false
	}
	at := strings.LastIndexByte(s, '@')
	local, domain := strings.ToLower(s[:at]), strings.ToLower(strings.TrimSuffix(s[at+1:], "."))
	if !validDomain(domain) {
		return Email{}, false
	}
	if i := strings.IndexByte(local, '+'); i > 0 {
		local = local[:i]
	}
	if domain == "googlemail.com" {
		domain = "gmail.com"
	}
	if domain == "gmail.com" {
		local = strings.ReplaceAll(local, ".", "")
	}
	if local == "" {
		return Email{}, false
	}
	return Email{Local: local, Domain: domain}, true
}

// emailLabel keeps the customer-e-mail hash apart from every other use of its key.
const emailLabel = "partnerstream/fraud/customer-email\x00"

// Hasher makes the keyed hash of a normalised customer e-mail, the only form in which one is
// stored: equal addresses give equal hashes, and without the key a hash cannot be tested
// against a guessed address.
type Hasher struct{ key []byte }

// NewHasher returns a hasher under key (an api-wide secret every replica shares).
func NewHasher(key []byte) Hasher { return Hasher{key: key} }

// Hash returns the 32-byte hash of e.
func (h Hasher) Hash(e Email) []byte {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(emailLabel))
	m.Write([]byte(e.String()))
	return m.Sum(nil)
}

//go:embed disposable_domains.json
var disposableJSON []byte

var disposable = sync.OnceValue(func() map[string]struct{} {
	var list []string
	if err := json.Unmarshal(disposableJSON, &list); err != nil {
		panic("fraud: the embedded disposable_domains.json is not a JSON list: " + err.Error())
	}
	out := make(map[string]struct{}, len(list))
	for _, d := range list {
		out[strings.ToLower(d)] = struct{}{}
	}
	return out
})

// Disposable reports whether domain, or a domain it is under, is a disposable-mail domain of
// the embedded list (hack/disposable-domains.sh) or of extra (a program's own list).
func Disposable(domain string, extra []string) bool {
	list := disposable()
	for d := domain; ; {
		if _, ok := list[d]; ok {
			return true
		}
		for _, x := range extra {
			if x == d {
				return true
			}
		}
		i := strings.IndexByte(d, '.')
		if i < 0 || !strings.Contains(d[i+1:], ".") {
			return false
		}
		d = d[i+1:]
	}
}

// DisposableCount is the number of domains in the embedded list.
func DisposableCount() int { return len(disposable()) }

// freeMail are the providers whose domain many unrelated people share: a customer at the same
// one as an affiliate's user is no sign of self-referral. The largest providers only; a
// company's own domain is what the rule looks for.
var freeMail = map[string]bool{
	"gmail.com": true, "yahoo.com": true, "ymail.com": true, "outlook.com": true, "hotmail.com": true, "live.com": true,
	"msn.com": true, "icloud.com": true, "me.com": true, "mac.com": true, "aol.com": true, "proton.me": true,
	"protonmail.com": true, "pm.me": true, "gmx.com": true, "gmx.de": true, "gmx.net": true, "web.de": true,
	"yandex.ru": true, "yandex.com": true, "mail.ru": true, "qq.com": true, "163.com": true, "126.com": true,
	"zoho.com": true, "fastmail.com": true, "tutanota.com": true, "hey.com": true, "yahoo.es": true, "hotmail.es": true,
	"yahoo.co.uk": true, "hotmail.co.uk": true, "yahoo.fr": true, "hotmail.fr": true, "orange.fr": true, "free.fr": true,
	"libero.it": true, "t-online.de": true, "naver.com": true, "rediffmail.com": true, "yahoo.co.jp": true, "uol.com.br": true,
	"bol.com.br": true, "terra.com.br": true, "comcast.net": true, "att.net": true, "verizon.net": true,
}

// FreeMail reports whether domain is a free-mail provider's.
func FreeMail(domain string) bool { return freeMail[domain] }

// What the self-referral rule observed (never the address itself).
const (
	MatchedUser   = "affiliate_user_email"
	MatchedDomain = "affiliate_company_domain"
)

// MatchAffiliate says whether customer is one of the affiliate's users (MatchedUser), or at
// the company domain one of them uses, when that domain is neither free-mail nor disposable
// (MatchedDomain); "" when neither.
func MatchAffiliate(customer Email, userEmails []string) string {
	domain := ""
	for _, raw := range userEmails {
		u, ok := ParseEmail(raw)
		if !ok {
			continue
		}
		if u == customer {
			return MatchedUser
		}
		if u.Domain == customer.Domain && !FreeMail(u.Domain) && !Disposable(u.Domain, nil) {
			domain = MatchedDomain
		}
	}
	return domain
}
