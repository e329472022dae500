package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

func TestMagicCodeSignUpThenSignIn(t *testing.T) {
	f := newFixture(t)
	email := "new.brand@example.test"
	r := f.do(t, "POST", "/api/auth/magic-code/verify", nil, `{"email":"`+email+`","code":"`+f.code(t, email)+`"}`)
	if r.status != 422 || r.problem.Code != "registration_required" {
		t.Fatalf("unknown address without sign-up details: %d %s", r.status, r.raw)
	}
	up := f.signUp(t, email, "advertiser")
	upBody := decode[signedIn](t, up)
	if !upBody.Registered || upBody.Company.Kind != "advertiser" {
		t.Fatalf("sign-up response: %s", up.raw)
	}
	me := f.do(t, "GET", "/api/auth/me", bearerOf(t, up), "")
	if me.status != 200 || decode[signedIn](t, me).User.Email != email {
		t.Fatalf("me: %d %s", me.status, me.raw)
	}
	in := f.do(t, "POST", "/api/auth/magic-code/verify", nil, `{"email":"NEW.Brand@example.test","code":"`+f.code(t, email)+`"}`)
	if in.status != 200 || decode[signedIn](t, in).Registered {
		t.Fatalf("second sign-in: %d %s", in.status, in.raw)
	}
	if decode[signedIn](t, in).Company.ID != upBody.Company.ID {
		t.Fatal("signing in again landed in another company")
	}
}

func TestAskingForTheRegistrationLeavesTheCodeValid(t *testing.T) {
	f := newFixture(t)
	email := "two.steps@example.test"
	code := f.code(t, email)
	verify := func(extra string) response {
		return f.do(t, "POST", "/api/auth/magic-code/verify", nil, `{"email":"`+email+`","code":"`+code+`"`+extra+`}`)
	}
	for range 2 {
		if r := verify(""); r.status != 422 || r.problem.Code != "registration_required" {
			t.Fatalf("a new address without sign-up details: %d %s", r.status, r.raw)
		}
	}
	up := verify(`,"company_kind":"affiliate","company_name":"Two Steps"`)
	if up.status != 200 || !decode[signedIn](t, up).Registered {
		t.Fatalf("the same code with the sign-up details: %d %s", up.status, up.raw)
	}
	if r := verify(`,"company_kind":"affiliate","company_name":"Two Steps"`); r.status != 401 || r.problem.Code != "invalid_code" {
		t.Fatalf("the code after the sign-up: %d %s, want it used", r.status, r.raw)
	}
}

func TestASignUpNameIsFreeTextWithoutControlCharacters(t *testing.T) {
	f := newFixture(t)
	email := "ctl@example.test"
	code := f.code(t, email)
	r := f.do(t, "POST", "/api/auth/magic-code/verify", nil, `{"email":"`+email+`","code":"`+code+`","company_kind":"affiliate","company_name":"Evil\r\nCo"}`)
	if r.status != 400 || !strings.Contains(r.raw, "must not contain control characters") {
		t.Fatalf("a company name with CR/LF: %d %s", r.status, r.raw)
	}
}

func TestWrongCodesAreRefusedAlikeAndLockAfterFive(t *testing.T) {
	f := newFixture(t)
	email := "locked@example.test"
	good := f.code(t, email)
	wrong := "000000"
	if good == wrong {
		wrong = "111111"
	}
	for i := 0; i < 5; i++ {
		r := f.do(t, "POST", "/api/auth/magic-code/verify", nil, `{"email":"`+email+`","code":"`+wrong+`","company_kind":"affiliate","company_name":"X"}`)
		if r.status != 401 {
			t.Fatalf("wrong code %d: %d %s", i, r.status, r.raw)
		}
	}
	r := f.do(t, "POST", "/api/auth/magic-code/verify", nil, `{"email":"`+email+`","code":"`+good+`","company_kind":"affiliate","company_name":"X"}`)
	if r.status != 401 {
		t.Fatalf("the right code after 5 wrong ones: %d %s", r.status, r.raw)
	}
}

func TestKnownAndUnknownAddressesGetTheSameAnswer(t *testing.T) {
	f := newFixture(t)
	f.signUp(t, "known@example.test", "affiliate")
	known := f.do(t, "POST", "/api/auth/magic-code", nil, `{"email":"known@example.test"}`)
	unknown := f.do(t, "POST", "/api/auth/magic-code", nil, `{"email":"unknown@example.test"}`)
	if known.status != unknown.status || known.raw != unknown.raw {
		t.Fatalf("known %d %s vs unknown %d %s", known.status, known.raw, unknown.status, unknown.raw)
	}
}

func TestCookieSessionsNeedTheCSRFTokenToChangeState(t *testing.T) {
	f := newFixture(t)
	up := f.signUp(t, "cookie@example.test", "advertiser")
	cookie, csrf := cookiesOf(up)
	if csrf == "" {
		t.Fatal("no CSRF cookie was set")
	}
	if r := f.do(t, "GET", "/api/auth/me", map[string]string{"Cookie": cookie}, ""); r.status != 200 {
		t.Fatalf("GET with the cookie: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/api-keys", map[string]string{"Cookie": cookie}, `{"name":"ci"}`); r.status != 403 || r.problem.Code != "csrf_failed" {
		t.Fatalf("POST with the cookie, no CSRF token: %d %s", r.status, r.raw)
	}
	r := f.do(t, "POST", "/api/api-keys", map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf}, `{"name":"ci"}`)
	if r.status != 201 {
		t.Fatalf("POST with the CSRF token: %d %s", r.status, r.raw)
	}
}

func TestAKeyMadeInTheDashboardWorksUntilRevoked(t *testing.T) {
	f := newFixture(t)
	s := bearerOf(t, f.signUp(t, "keys@example.test", "affiliate"))
	made := f.do(t, "POST", "/api/api-keys", s, `{"name":"reporting"}`)
	if made.status != 201 {
		t.Fatalf("create: %d %s", made.status, made.raw)
	}
	k := decode[createdKey](t, made)
	key := k.Key
	use := apiKey(key)
	if r := f.do(t, "GET", "/api/partner-api/me", use, ""); r.status != 200 {
		t.Fatalf("using the new key: %d %s", r.status, r.raw)
	}
	list := f.do(t, "GET", "/api/api-keys", s, "")
	if strings.Contains(list.raw, key) || !strings.Contains(list.raw, k.Prefix) {
		t.Fatalf("the list must show the prefix, never the key: %s", list.raw)
	}
	if r := f.do(t, "DELETE", "/api/api-keys/"+k.ID, s, ""); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/partner-api/me", use, ""); r.status != 401 {
		t.Fatalf("a revoked key still works: %d", r.status)
	}
}

func TestAKeyNameIsFreeTextWithoutControlCharacters(t *testing.T) {
	f := newFakeFixture(t)
	s := f.dashboardAs(identity.Advertiser, "owner")
	for _, name := range []string{`"a\u0007b"`, `"ci\r\nX-Injected: 1"`, `""`, `"` + strings.Repeat("k", 101) + `"`} {
		r := f.do(t, "POST", "/api/api-keys", s, `{"name":`+name+`}`)
		if r.status != 400 || r.problem.Code != "validation_failed" || len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != "name" {
			t.Errorf("name %s: %d %s, want 400 validation_failed on name", name, r.status, r.raw)
		}
	}
	if r := f.do(t, "POST", "/api/api-keys", s, `{"name":"  Reporting – ñ  "}`); r.status != 201 || decode[createdKey](t, r).Name != "Reporting – ñ" {
		t.Fatalf("a plain name: %d %s", r.status, r.raw)
	}
}

func TestACompanyNeverSeesOrRevokesAnothersKeys(t *testing.T) {
	f := newFixture(t)
	a := bearerOf(t, f.signUp(t, "a@example.test", "advertiser"))
	b := bearerOf(t, f.signUp(t, "b@example.test", "affiliate"))
	made := f.do(t, "POST", "/api/api-keys", a, `{"name":"a's key"}`)
	k := decode[createdKey](t, made)
	id := k.ID
	if r := f.do(t, "GET", "/api/api-keys", b, ""); strings.Contains(r.raw, id) {
		t.Fatalf("b lists a's key: %s", r.raw)
	}
	if r := f.do(t, "DELETE", "/api/api-keys/"+id, b, ""); r.status != 404 {
		t.Fatalf("b revoking a's key: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/partner-api/me", apiKey(k.Key), ""); r.status != 200 {
		t.Fatalf("a's key stopped working: %d", r.status)
	}
}

func TestLogoutAndRefresh(t *testing.T) {
	f := newFixture(t)
	up := f.signUp(t, "out@example.test", "advertiser")
	first := decode[signedIn](t, up).RefreshToken
	refreshed := f.do(t, "POST", "/api/auth/refresh", nil, `{"refresh_token":"`+first+`"}`)
	if refreshed.status != 200 || decode[signedIn](t, refreshed).RefreshToken == first {
		t.Fatalf("refresh: %d %s", refreshed.status, refreshed.raw)
	}
	f.skew.Store(int64(time.Minute)) // past the grace for racing refreshes
	reused := f.do(t, "POST", "/api/auth/refresh", nil, `{"refresh_token":"`+first+`"}`)
	if reused.status != 401 {
		t.Fatalf("a reused refresh token: %d %s", reused.status, reused.raw)
	}
	// Reuse is theft: the whole session is revoked, the fresh tokens included.
	if r := f.do(t, "GET", "/api/auth/me", bearerOf(t, refreshed), ""); r.status != 401 {
		t.Fatalf("the session survived a reused refresh token: %d", r.status)
	}
	other := f.do(t, "POST", "/api/auth/magic-code/verify", nil, `{"email":"out@example.test","code":"`+f.code(t, "out@example.test")+`"}`)
	if r := f.do(t, "POST", "/api/auth/logout", bearerOf(t, other), ""); r.status != 204 {
		t.Fatalf("logout: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/auth/me", bearerOf(t, other), ""); r.status != 401 || r.problem.Code != "session_revoked" {
		t.Fatalf("after logout: %d %s", r.status, r.raw)
	}
}

func TestOAuthSignUpThroughTheRoutes(t *testing.T) {
	f := newFixture(t)
	f.google.SetUser(testenv.OIDCUser{Subject: "g-1", Email: "Gina@Example.test", EmailVerified: true, Name: "Gina"})
	start := f.do(t, "GET", "/api/auth/oauth/google/start?company_kind=affiliate&company_name=Gina%20Media&return_to=/welcome", nil, "")
	if start.status != 302 {
		t.Fatalf("start: %d %s", start.status, start.raw)
	}
	stateCookie, _ := cookiesOf(start)
	back := testenv.FollowAuthorize(t, start.header.Get("Location"))
	callback := back.Path + "?" + back.RawQuery
	if r := f.do(t, "GET", callback, nil, ""); r.status != 302 || !strings.Contains(r.header.Get("Location"), "error=oauth_state") {
		t.Fatalf("a callback without the browser's state cookie: %d %s", r.status, r.header.Get("Location"))
	}
	done := f.do(t, "GET", callback, map[string]string{"Cookie": stateCookie}, "")
	if done.status != 302 || done.header.Get("Location") != "/welcome" {
		t.Fatalf("callback: %d -> %q", done.status, done.header.Get("Location"))
	}
	cookie, _ := cookiesOf(done)
	me := f.do(t, "GET", "/api/auth/me", map[string]string{"Cookie": cookie}, "")
	if who := decode[signedIn](t, me); me.status != 200 || who.User.Email != "gina@example.test" || who.Company.Name != "Gina Media" {
		t.Fatalf("me after OAuth sign-up: %d %s", me.status, me.raw)
	}
	if r := f.do(t, "GET", callback, map[string]string{"Cookie": stateCookie}, ""); !strings.Contains(r.header.Get("Location"), "error=oauth_state") {
		t.Fatalf("a replayed callback: %d %s", r.status, r.header.Get("Location"))
	}
}
