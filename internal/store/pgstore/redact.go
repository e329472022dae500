package pgstore

import (
	"cmp"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// passwordSetting matches a password given as a keyword/value setting or a URL query parameter.
// A value may be quoted or hold backslash-escaped spaces, as in libpq's keyword/value syntax.
var passwordSetting = regexp.MustCompile(`(?i)(?:ssl)?password\s*=\s*('(?:\\.|[^'])*'|(?:\\.|[^\s&])+)`)

const mask = "xxxxx"

// redact returns the reason err gives for rejecting connString, with every password candidate
// found in connString masked. pgx quotes the whole string before its reason and redacts it only
// on a best-effort basis; a malformed string, the very case that produces a parse error, is
// where it may miss (it does for "password = x"), so the quote is dropped rather than trusted.
// The result deliberately does not wrap err: its chain holds the raw connection string.
func redact(err error, connString string) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); strings.HasPrefix(msg, "cannot parse `") && i >= 0 {
		msg = msg[i+len("`: "):]
	}
	for _, secret := range passwordCandidates(connString) {
		msg = strings.ReplaceAll(msg, secret, mask)
	}
	return errors.New(msg)
}

// passwordCandidates lists, longest first, every substring of connString that may be a
// password, in each spelling an error message may quote it in. Malformed input has no certain
// boundaries, so it guesses generously: masking too much only costs legibility.
func passwordCandidates(connString string) []string {
	var raw []string
	if _, rest, ok := strings.Cut(connString, "://"); ok {
		// An unescaped '@' inside the password makes the end of the userinfo ambiguous.
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			raw = append(raw, userinfoPassword(rest[:i]))
		}
		if i := strings.IndexByte(rest, '@'); i >= 0 {
			raw = append(raw, userinfoPassword(rest[:i]))
		}
	}
	for _, m := range passwordSetting.FindAllStringSubmatch(connString, -1) {
		raw = append(raw, m[1], strings.Trim(m[1], "'"))
	}
	var out []string
	for _, s := range raw {
		out = append(out, spellings(s)...)
	}
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	return slices.Compact(out)
}

func userinfoPassword(userinfo string) string {
	_, password, _ := strings.Cut(userinfo, ":")
	return password
}

// spellings returns s as written, percent-decoded, and as it appears inside a %q quote.
func spellings(s string) []string {
	forms := []string{s}
	if decoded, err := url.PathUnescape(s); err == nil && decoded != s {
		forms = append(forms, decoded)
	}
	quoted := make([]string, 0, len(forms))
	for _, f := range forms {
		q := strconv.Quote(f)
		quoted = append(quoted, q[1:len(q)-1])
	}
	return append(forms, quoted...)
}
