package dashboard

import "testing"

// Message is the catalogue's text of id in locale, which the browser checks compare the
// page with: a page in the wrong language, or a message that is not the one meant, fails.
func Message(t testing.TB, locale, id string) string {
	t.Helper()
	c, err := loadCatalogue(localeFiles)
	if err != nil {
		t.Fatal(err)
	}
	s := c.translator(locale).T(id)
	if s == "["+id+"]" {
		t.Fatalf("no message %s in %s", id, locale)
	}
	return s
}
