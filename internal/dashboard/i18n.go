package dashboard

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"github.com/BurntSushi/toml"
	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

//go:embed locales/*.toml
var localeFiles embed.FS

// Locales the dashboard speaks; the first is the fallback.
var Locales = []string{"en", "es"}

// catalogue holds the messages of every locale: the go-i18n bundle for the templates and the
// flat id -> text map that pages hand to their JavaScript.
type catalogue struct {
	bundle  *i18n.Bundle
	matcher language.Matcher
	flat    map[string]map[string]string // locale -> id -> text
}

func loadCatalogue(files fs.FS) (*catalogue, error) {
	tags := make([]language.Tag, len(Locales))
	for i, l := range Locales {
		tags[i] = language.MustParse(l)
	}
	b := i18n.NewBundle(tags[0])
	b.RegisterUnmarshalFunc("toml", toml.Unmarshal)
	c := &catalogue{bundle: b, matcher: language.NewMatcher(tags), flat: map[string]map[string]string{}}
	for _, l := range Locales {
		path := "locales/" + l + ".toml"
		buf, err := fs.ReadFile(files, path)
		if err != nil {
			return nil, fmt.Errorf("dashboard: catalogue %s: %w", l, err)
		}
		mf, err := b.ParseMessageFileBytes(buf, path)
		if err != nil {
			return nil, fmt.Errorf("dashboard: catalogue %s: %w", l, err)
		}
		m := make(map[string]string, len(mf.Messages))
		for _, msg := range mf.Messages {
			m[msg.ID] = msg.Other
		}
		c.flat[l] = m
	}
	return c, nil
}

// match picks the supported locale closest to a list of preferences (an Accept-Language
// header, a cookie, a saved setting), or "" when none is given.
func (c *catalogue) match(prefs ...string) string {
	for _, p := range prefs {
		if p == "" {
			continue
		}
		tags, _, err := language.ParseAcceptLanguage(p)
		if err != nil || len(tags) == 0 {
			continue
		}
		_, i, conf := c.matcher.Match(tags...)
		if conf != language.No {
			return Locales[i]
		}
	}
	return ""
}

// supported reports whether l is exactly one of Locales.
func supported(l string) bool {
	for _, s := range Locales {
		if s == l {
			return true
		}
	}
	return false
}

// translator renders the messages of one locale.
type translator struct {
	locale string
	loc    *i18n.Localizer
	c      *catalogue
}

func (c *catalogue) translator(locale string) translator {
	return translator{locale: locale, loc: i18n.NewLocalizer(c.bundle, locale), c: c}
}

// T returns the message id in the translator's locale. A missing id shows itself in brackets
// (the catalogue test keeps that from shipping) rather than breaking the page.
func (t translator) T(id string) string {
	s, err := t.loc.Localize(&i18n.LocalizeConfig{MessageID: id})
	if err != nil {
		return "[" + id + "]"
	}
	return s
}

// messages is the locale's catalogue for the page's JavaScript.
func (t translator) messages() map[string]string { return t.c.flat[t.locale] }

// ids lists the message ids of a locale, sorted.
func (c *catalogue) ids(locale string) []string {
	out := make([]string, 0, len(c.flat[locale]))
	for id := range c.flat[locale] {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// languageNames are the locales' names in their own language, for the switch.
var languageNames = map[string]string{"en": "English", "es": "Español"}
