package dashboard

import (
	"io/fs"
	"regexp"
	"slices"
	"testing"

	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/stats"
)

// keyUses finds the message ids the templates and modules use: .T "id" / $.T "id" in
// templates, t('id') / t("id") in JavaScript. Ids built at run time are listed in
// dynamicKeys.
var (
	templateKey = regexp.MustCompile(`\.T "([a-z0-9_.]+)"`)
	scriptKey   = regexp.MustCompile(`\bt\(\s*['"]([a-z0-9_.]*[a-z0-9])['"]`)
)

// dynamicKeys are ids composed at run time ("status." + s, "error." + code, page titles,
// "login.with_" + provider): the catalogue must hold each of them.
func dynamicKeys() []string {
	keys := []string{"login.with_google", "login.with_linkedin", loginPage.Title()}
	for _, p := range pages {
		keys = append(keys, p.Title())
	}
	for _, s := range []string{"pending", "approved", "rejected", "paid", "reversed", "failed", "canceled", "succeeded", "active", "suspended", "paused", "archived"} {
		keys = append(keys, "status."+s, "forms.status_m."+s)
	}
	// Every code the API gives a field error has its sentence under the field.
	for _, c := range httpapi.FieldCodes {
		keys = append(keys, "forms.field."+c.Code)
	}
	keys = append(keys, "forms.field.invalid")
	for _, v := range []string{"public", "approval"} {
		keys = append(keys, "programs.visibility_"+v)
		keys = append(keys, "listing.visibility_"+v)
	}
	for _, c := range programs.Categories {
		keys = append(keys, "listing.cat_"+c)
	}
	for _, a := range []string{"reject", "suspend"} {
		keys = append(keys, "partnerships.confirm_"+a)
	}
	for _, a := range []string{"approve", "reject", "suspend"} {
		keys = append(keys, "partnerships.done_"+a)
	}
	for _, r := range []string{"owner", "admin", "member"} {
		keys = append(keys, "people.header.role_"+r)
	}
	for _, f := range []string{"display_name", "website", "audience", "payout_email"} {
		keys = append(keys, "people.profile.invalid_"+f)
	}
	for _, a := range []string{"failed", "cancel"} {
		keys = append(keys, "payouts.confirm_"+a)
	}
	for _, a := range []string{"paid", "failed", "cancel"} {
		keys = append(keys, "payouts.done_"+a)
	}
	for _, r := range []string{"owner", "admin", "member"} {
		keys = append(keys, "team.role_"+r)
	}
	for _, s := range []string{"pending", "expired"} {
		keys = append(keys, "team.status_"+s)
	}
	for _, c := range []string{"last_owner", "already_member", "email_has_account", "email_not_sent", "partnership_decided"} {
		keys = append(keys, "people.error_"+c)
	}
	for _, s := range []string{"sale", "lead", "signup", "install", "custom"} {
		keys = append(keys, "conversion_type."+s)
	}
	// The traffic page names its tables and device types by the API's values.
	for _, d := range trafficDimensions {
		keys = append(keys, "traffic.dim_"+string(d), "traffic.col_"+string(d))
	}
	for _, d := range stats.Devices {
		keys = append(keys, "traffic.device_"+d)
	}
	return keys
}

func usedKeys(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	scan := func(fsys fs.FS, re *regexp.Regexp) {
		err := fs.WalkDir(fsys, ".", func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				used[m[1]] = append(used[m[1]], p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	scan(templateFiles, templateKey)
	scan(assetFiles, scriptKey)
	for _, k := range dynamicKeys() {
		used[k] = append(used[k], "dashboard.go")
	}
	return used
}

func TestEveryLocaleHasTheSameMessages(t *testing.T) {
	c, err := loadCatalogue(localeFiles)
	if err != nil {
		t.Fatal(err)
	}
	ref := c.ids(Locales[0])
	if len(ref) == 0 {
		t.Fatal("the English catalogue is empty")
	}
	for _, l := range Locales[1:] {
		got := c.ids(l)
		for _, id := range ref {
			if _, ok := slices.BinarySearch(got, id); !ok {
				t.Errorf("%s.toml lacks %q", l, id)
			}
		}
		for _, id := range got {
			if _, ok := slices.BinarySearch(ref, id); !ok {
				t.Errorf("%s.toml has %q, which %s.toml lacks", l, id, Locales[0])
			}
		}
		for _, id := range got {
			if c.flat[l][id] == "" {
				t.Errorf("%s.toml: %q is empty", l, id)
			}
		}
	}
}

func TestEveryMessageUsedByATemplateOrModuleExists(t *testing.T) {
	c, err := loadCatalogue(localeFiles)
	if err != nil {
		t.Fatal(err)
	}
	used := usedKeys(t)
	if len(used) < 20 {
		t.Fatalf("found only %d message uses: is the scan broken?", len(used))
	}
	for _, l := range Locales {
		for id, files := range used {
			if _, ok := c.flat[l][id]; !ok {
				t.Errorf("%s.toml lacks %q, used in %v", l, id, slices.Compact(files))
			}
		}
	}
}

func TestLocaleMatchingFollowsAcceptLanguage(t *testing.T) {
	c, err := loadCatalogue(localeFiles)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ header, want string }{
		{"es-MX,es;q=0.9,en;q=0.8", "es"},
		{"en-GB,en;q=0.9", "en"},
		{"fr-FR,fr;q=0.9,es;q=0.5", "es"},
		{"de-DE", ""},
		{"", ""},
		{"!!!", ""},
	} {
		if got := c.match(tc.header); got != tc.want {
			t.Errorf("match(%q) = %q, want %q", tc.header, got, tc.want)
		}
	}
}
