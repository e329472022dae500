package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// fixture is a migrated database with one advertiser and one user, and a Manager on it.
type fixture struct {
	pool    *pgxpool.Pool
	clock   *testenv.Clock
	spec    string
	m       *Manager
	subject Subject
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	_, pool := pgtest.Migrated(t)
	f := &fixture{pool: pool, clock: testenv.NewClock(), spec: GenerateKeySpec()}
	f.m = f.manager(t, f.spec, Options{})
	f.subject = f.addUser(t, "advertiser", "owner")
	return f
}

// manager returns a Manager on the fixture's database and clock with other keys or options.
func (f *fixture) manager(t testing.TB, spec string, opts Options) *Manager {
	t.Helper()
	keys, err := ParseKeys(spec)
	if err != nil {
		t.Fatalf("ParseKeys: %v", err)
	}
	opts.Now = f.clock.Now
	return NewManager(f.pool, keys, opts)
}

// addUser inserts a company and a user with SQL, so these tests depend on the schema only.
func (f *fixture) addUser(t testing.TB, kind, role string) Subject {
	t.Helper()
	s := Subject{UserID: ids.New(ids.User), CompanyID: ids.New(ids.Company), CompanyKind: kind, Role: role, Locale: "es"}
	ctx := context.Background()
	if _, err := f.pool.Exec(ctx, `INSERT INTO companies (id, kind, name, locale) VALUES ($1, $2, 'Acme', 'es')`, s.CompanyID, kind); err != nil {
		t.Fatalf("insert company: %v", err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO users (id, company_id, email, role, locale) VALUES ($1, $2, $3, $4, 'es')`,
		s.UserID, s.CompanyID, s.UserID+"@example.com", role); err != nil {
		t.Fatalf("insert user: %v", err)
	}
	return s
}

func (f *fixture) issue(t testing.TB) Tokens {
	t.Helper()
	tok, err := f.m.Issue(context.Background(), f.subject, Meta{UserAgent: "Mozilla/5.0", IP: "203.0.113.7"})
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	return tok
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func TestIssueThenVerifyReturnsTheSubject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tok := f.issue(t)

	if !ids.Valid(sessionPrefix, tok.SessionID) {
		t.Errorf("session id %q is not a ses_ id", tok.SessionID)
	}
	now := f.clock.Now()
	if !tok.AccessExpiresAt.Equal(now.Add(DefaultAccessTTL)) || !tok.SessionExpiresAt.Equal(now.Add(DefaultRefreshTTL)) {
		t.Errorf("expiries %v / %v, want 15 min / 30 days from %v", tok.AccessExpiresAt, tok.SessionExpiresAt, now)
	}
	if tok.Refresh == "" || tok.CSRF != f.m.CSRFToken(tok.SessionID) {
		t.Errorf("refresh %q, csrf %q: want a refresh token and the session's CSRF token", tok.Refresh, tok.CSRF)
	}

	got, err := f.m.Verify(ctx, tok.Access)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Claims{UserID: f.subject.UserID, CompanyID: f.subject.CompanyID, CompanyKind: "advertiser", Role: "owner",
		Locale: "es", SessionID: tok.SessionID, ExpiresAt: tok.AccessExpiresAt}
	if got != want {
		t.Errorf("claims\n got %+v\nwant %+v", got, want)
	}

	header, _, _ := strings.Cut(tok.Access, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(header)
	keys, _ := ParseKeys(f.spec)
	if wantKid := `"kid":"` + keys.IDs()[0] + `"`; !strings.Contains(string(raw), wantKid) || !strings.Contains(string(raw), `"alg":"HS256"`) {
		t.Errorf("header %s: want alg HS256 and %s", raw, wantKid)
	}

	var hash []byte
	var agent, ip string
	if err := f.pool.QueryRow(ctx, `SELECT refresh_hash, user_agent, ip FROM sessions WHERE id = $1`, tok.SessionID).
		Scan(&hash, &agent, &ip); err != nil {
		t.Fatalf("select session: %v", err)
	}
	if sum := sha256.Sum256([]byte(tok.Refresh)); !bytes.Equal(hash, sum[:]) {
		t.Error("the stored refresh hash is not the SHA-256 of the refresh token")
	}
	if agent != "Mozilla/5.0" || ip != "203.0.113.7" {
		t.Errorf("stored client %q %q", agent, ip)
	}
}

func TestIssueRefusesAnIncompleteSubject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		edit func(*Subject)
	}{
		{"a subject without a user", func(s *Subject) { s.UserID = "" }},
		{"a subject without a company", func(s *Subject) { s.CompanyID = "" }},
		{"a subject of an unknown company kind", func(s *Subject) { s.CompanyKind = "admin" }},
		{"a subject without a role", func(s *Subject) { s.Role = "" }},
		{"a user that does not exist", func(s *Subject) { s.UserID = ids.New(ids.User) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := f.subject
			tc.edit(&s)
			if _, err := f.m.Issue(context.Background(), s, Meta{}); err == nil {
				t.Fatal("Issue accepted it")
			}
		})
	}
}

func TestIssueStoresAnyClientDescription(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	agent := "bad\x00agent\xff" + strings.Repeat("é", 400)
	tok, err := f.m.Issue(context.Background(), f.subject, Meta{UserAgent: agent, IP: "\x00"})
	if err != nil {
		t.Fatalf("Issue with a hostile user agent: %v", err)
	}
	var stored string
	if err := f.pool.QueryRow(context.Background(), `SELECT user_agent FROM sessions WHERE id = $1`, tok.SessionID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stored, "badagenté") || len(stored) > maxUserAgent {
		t.Errorf("stored user agent %q (%d bytes)", stored[:20], len(stored))
	}
}

// forge signs a token like ours, for a real session, with any method, key and kid; edit can
// change the claims first.
func forge(t *testing.T, tok Tokens, s Subject, now time.Time, method jwt.SigningMethod, key any, kid string, edit func(*tokenClaims)) string {
	t.Helper()
	c := &tokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: Issuer, Subject: s.UserID, Audience: jwt.ClaimStrings{Audience},
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
		},
		CompanyID: s.CompanyID, CompanyKind: s.CompanyKind, Role: s.Role, SessionID: tok.SessionID, Locale: s.Locale,
	}
	if edit != nil {
		edit(c)
	}
	token := jwt.NewWithClaims(method, c)
	if kid != "" {
		token.Header["kid"] = kid
	}
	signed, err := token.SignedString(key)
	if err != nil {
		t.Fatalf("forge: %v", err)
	}
	return signed
}

func TestVerifyRefusesForgedAndForeignTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(t)
	now := f.clock.Now()
	keys, _ := ParseKeys(f.spec)
	ours := keys.signing()
	other, _ := ParseKeys(GenerateKeySpec())
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(method jwt.SigningMethod, key any, kid string, edit func(*tokenClaims)) string {
		return forge(t, tok, f.subject, now, method, key, kid, edit)
	}
	// The control proves forge makes tokens we accept: each case below changes one thing.
	if _, err := f.m.Verify(context.Background(), sign(jwt.SigningMethodHS256, ours.secret, ours.id, nil)); err != nil {
		t.Fatalf("a well-forged control token is refused: %v", err)
	}
	head, rest, _ := strings.Cut(tok.Access, ".")
	payload, sig, _ := strings.Cut(rest, ".")
	flip := func(s string) string { // change one base64url character, keeping the length
		b := []byte(s)
		if b[len(b)/2] == 'A' {
			b[len(b)/2] = 'B'
		} else {
			b[len(b)/2] = 'A'
		}
		return string(b)
	}
	// The last character of a 32-byte signature carries 2 unused bits: setting one encodes the
	// same bytes, which only strict decoding refuses.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	sloppySig := sig[:len(sig)-1] + string(alphabet[strings.IndexByte(alphabet, sig[len(sig)-1])^1])
	rawPayload, _ := base64.RawURLEncoding.DecodeString(payload)
	promoted := base64.RawURLEncoding.EncodeToString(bytes.Replace(rawPayload, []byte(`"role":"owner"`), []byte(`"role":"admin"`), 1))

	for _, tc := range []struct {
		name  string
		token string
	}{
		{"an empty token", ""},
		{"a token that is not a JWT", "not-a-jwt"},
		{"a token over the size limit", strings.Repeat("a", maxTokenLen+1)},
		{"a payload changed after signing", head + "." + promoted + "." + sig},
		{"a payload with one character flipped", head + "." + flip(payload) + "." + sig},
		{"a signature with one character flipped", head + "." + payload + "." + flip(sig)},
		{"a token without a signature", head + "." + payload + "."},
		{"a signature with non-canonical base64", head + "." + payload + "." + sloppySig},
		{"a token with alg none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, ours.id, nil)},
		{"an HS256 token signed with another key under our kid", sign(jwt.SigningMethodHS256, other.signing().secret, ours.id, nil)},
		{"an HS512 token signed with our key", sign(jwt.SigningMethodHS512, ours.secret, ours.id, nil)},
		{"an RS256 token", sign(jwt.SigningMethodRS256, rsaKey, ours.id, nil)},
		{"a token with an unknown kid", sign(jwt.SigningMethodHS256, ours.secret, "retired", nil)},
		{"a token without a kid", sign(jwt.SigningMethodHS256, ours.secret, "", nil)},
		{"a token of another issuer", sign(jwt.SigningMethodHS256, ours.secret, ours.id, func(c *tokenClaims) { c.Issuer = "someone-else" })},
		{"a token for another audience", sign(jwt.SigningMethodHS256, ours.secret, ours.id, func(c *tokenClaims) { c.Audience = jwt.ClaimStrings{"partnerstream-api"} })},
		{"a token without an expiry", sign(jwt.SigningMethodHS256, ours.secret, ours.id, func(c *tokenClaims) { c.ExpiresAt = nil })},
		{"a token issued in the future", sign(jwt.SigningMethodHS256, ours.secret, ours.id, func(c *tokenClaims) { c.IssuedAt = jwt.NewNumericDate(now.Add(time.Minute)) })},
		{"a token not valid yet", sign(jwt.SigningMethodHS256, ours.secret, ours.id, func(c *tokenClaims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Minute)) })},
		{"a token without a session", sign(jwt.SigningMethodHS256, ours.secret, ours.id, func(c *tokenClaims) { c.SessionID = "" })},
		{"a token of a session that does not exist", sign(jwt.SigningMethodHS256, ours.secret, ours.id, func(c *tokenClaims) { c.SessionID = ids.New(sessionPrefix) })},
		{"a token naming another user than its session's", sign(jwt.SigningMethodHS256, ours.secret, ours.id, func(c *tokenClaims) { c.Subject = ids.New(ids.User) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.m.Verify(context.Background(), tc.token)
			wantErr(t, "Verify", err, ErrInvalidToken)
		})
	}
}

func TestAccessTokenExpiresOnTheInjectedClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(t)
	ctx := context.Background()

	f.clock.Advance(DefaultAccessTTL + leeway - time.Second)
	if _, err := f.m.Verify(ctx, tok.Access); err != nil {
		t.Fatalf("within the leeway after expiry: %v", err)
	}
	f.clock.Advance(2 * time.Second)
	_, err := f.m.Verify(ctx, tok.Access)
	wantErr(t, "Verify after expiry", err, ErrExpired)

	// The session lives on: a refresh gives a working access token.
	next, err := f.m.Refresh(ctx, tok.Refresh)
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if _, err := f.m.Verify(ctx, next.Access); err != nil {
		t.Fatalf("Verify of the refreshed token: %v", err)
	}
}

func TestExpiredSessionIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()

	t.Run("an access token never outlives its session", func(t *testing.T) {
		short := f.manager(t, f.spec, Options{AccessTTL: time.Hour, RefreshTTL: 10 * time.Minute})
		tok, err := short.Issue(ctx, f.subject, Meta{})
		if err != nil {
			t.Fatal(err)
		}
		if !tok.AccessExpiresAt.Equal(tok.SessionExpiresAt) {
			t.Errorf("access token expires at %v, after its session (%v)", tok.AccessExpiresAt, tok.SessionExpiresAt)
		}
	})

	t.Run("a session row past its end is refused though the token is valid", func(t *testing.T) {
		tok := f.issue(t)
		if _, err := f.pool.Exec(ctx, `UPDATE sessions SET expires_at = $2 WHERE id = $1`, tok.SessionID, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		_, err := f.m.Verify(ctx, tok.Access)
		wantErr(t, "Verify", err, ErrExpired)
		_, err = f.m.Refresh(ctx, tok.Refresh)
		wantErr(t, "Refresh", err, ErrExpired)
	})

	t.Run("a session ends after RefreshTTL on the clock", func(t *testing.T) {
		tok := f.issue(t)
		f.clock.Advance(DefaultRefreshTTL)
		_, err := f.m.Refresh(ctx, tok.Refresh)
		wantErr(t, "Refresh at the end of the session", err, ErrExpired)
	})
}

func TestKeyRotationKeepsOldTokensWhileTheirKeyIsInTheSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := f.issue(t) // signed by f.spec's key
	newSpec := GenerateKeySpec()
	newKid, _, _ := strings.Cut(newSpec, ":")

	rotated := f.manager(t, newSpec+","+f.spec, Options{})
	if _, err := rotated.Verify(ctx, old.Access); err != nil {
		t.Fatalf("a token of the old key, with the old key still in the set: %v", err)
	}
	if err := rotated.CheckCSRF(old.SessionID, old.CSRF); err != nil {
		t.Fatalf("a CSRF token of the old key, with the old key still in the set: %v", err)
	}
	fresh, err := rotated.Refresh(ctx, old.Refresh)
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if header, _, _ := jwt.NewParser().ParseUnverified(fresh.Access, &tokenClaims{}); header == nil || header.Header["kid"] != newKid {
		t.Fatalf("the refreshed token is not signed with the new key %q", newKid)
	}

	removed := f.manager(t, newSpec, Options{})
	_, err = removed.Verify(ctx, old.Access)
	wantErr(t, "Verify of an old-key token after the old key is removed", err, ErrInvalidToken)
	wantErr(t, "CheckCSRF of an old-key token after the old key is removed", removed.CheckCSRF(old.SessionID, old.CSRF), ErrCSRF)
	if _, err := removed.Verify(ctx, fresh.Access); err != nil {
		t.Fatalf("a token of the new key: %v", err)
	}
	if err := removed.CheckCSRF(fresh.SessionID, fresh.CSRF); err != nil {
		t.Fatalf("the CSRF token handed out on refresh: %v", err)
	}
}

func TestRevokedSessionIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()

	t.Run("sign-out", func(t *testing.T) {
		tok := f.issue(t)
		if err := f.m.Revoke(ctx, tok.SessionID); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		_, err := f.m.Verify(ctx, tok.Access)
		wantErr(t, "Verify", err, ErrRevoked)
		_, err = f.m.Refresh(ctx, tok.Refresh)
		wantErr(t, "Refresh", err, ErrRevoked)
		if err := f.m.Revoke(ctx, tok.SessionID); err != nil {
			t.Fatalf("revoking twice: %v", err)
		}
	})

	t.Run("sign-out everywhere leaves other users alone", func(t *testing.T) {
		a, b := f.issue(t), f.issue(t)
		otherUser := f.addUser(t, "affiliate", "member")
		other, err := f.m.Issue(ctx, otherUser, Meta{})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.m.RevokeAllForUser(ctx, f.subject.UserID); err != nil {
			t.Fatalf("RevokeAllForUser: %v", err)
		}
		for _, tok := range []Tokens{a, b} {
			_, err := f.m.Verify(ctx, tok.Access)
			wantErr(t, "Verify", err, ErrRevoked)
		}
		if _, err := f.m.Verify(ctx, other.Access); err != nil {
			t.Fatalf("another user's session: %v", err)
		}
	})
}

func TestRefreshRotatesAndAReusedTokenRevokesTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first := f.issue(t)

	f.clock.Advance(time.Minute)
	second, err := f.m.Refresh(ctx, first.Refresh)
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if second.Refresh == "" || second.Refresh == first.Refresh || second.SessionID != first.SessionID || second.Access == first.Access {
		t.Fatalf("refresh did not rotate: %+v", second)
	}
	var lastUsed time.Time
	if err := f.pool.QueryRow(ctx, `SELECT last_used_at FROM sessions WHERE id = $1`, first.SessionID).Scan(&lastUsed); err != nil || !lastUsed.Equal(f.clock.Now()) {
		t.Errorf("last_used_at %v (%v), want the time of the refresh", lastUsed, err)
	}

	f.clock.Advance(reuseGrace + time.Second)
	third, err := f.m.Refresh(ctx, second.Refresh)
	if err != nil {
		t.Fatalf("Refresh with the rotated token: %v", err)
	}

	// The first token is presented again long after its rotation: someone else has a copy.
	_, err = f.m.Refresh(ctx, first.Refresh)
	wantErr(t, "Refresh with a retired token", err, ErrRefreshReused)
	wantErr(t, "Refresh with a retired token", err, ErrRevoked)
	_, err = f.m.Verify(ctx, third.Access)
	wantErr(t, "Verify of the latest access token after the reuse", err, ErrRevoked)
	_, err = f.m.Refresh(ctx, third.Refresh)
	wantErr(t, "Refresh with the latest token after the reuse", err, ErrRevoked)
}

func TestRefreshRacingAnotherWithTheSameTokenKeepsTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tok := f.issue(t)

	// Two browser tabs (here eight) refresh with the same cookie at once.
	const tabs = 8
	results := make([]Tokens, tabs)
	errs := make([]error, tabs)
	var wg sync.WaitGroup
	for i := range tabs {
		wg.Go(func() { results[i], errs[i] = f.m.Refresh(ctx, tok.Refresh) })
	}
	wg.Wait()
	var rotated []Tokens
	for i, err := range errs {
		if err != nil {
			t.Fatalf("tab %d: %v", i, err)
		}
		if _, err := f.m.Verify(ctx, results[i].Access); err != nil {
			t.Fatalf("tab %d's access token: %v", i, err)
		}
		if results[i].Refresh != "" {
			rotated = append(rotated, results[i])
		}
	}
	if len(rotated) != 1 {
		t.Fatalf("%d tabs got a new refresh token, want exactly 1", len(rotated))
	}
	if _, err := f.m.Refresh(ctx, rotated[0].Refresh); err != nil {
		t.Fatalf("the winner's refresh token: %v", err)
	}
}

func TestRefreshWithinTheGraceGivesAnAccessTokenOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tok := f.issue(t)
	next, err := f.m.Refresh(ctx, tok.Refresh)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(reuseGrace)
	late, err := f.m.Refresh(ctx, tok.Refresh)
	if err != nil {
		t.Fatalf("Refresh with the just-rotated token: %v", err)
	}
	if late.Refresh != "" || late.Access == "" {
		t.Fatalf("late refresh gave refresh %q, access %q: want an access token only", late.Refresh, late.Access)
	}
	if _, err := f.m.Refresh(ctx, next.Refresh); err != nil {
		t.Fatalf("the current refresh token after a late duplicate: %v", err)
	}
}

func TestRefreshCarriesTheUsersCurrentRoleAndLocale(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tok := f.issue(t)
	if _, err := f.pool.Exec(ctx, `UPDATE users SET role = 'member', locale = 'en' WHERE id = $1`, f.subject.UserID); err != nil {
		t.Fatal(err)
	}
	next, err := f.m.Refresh(ctx, tok.Refresh)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.m.Verify(ctx, next.Access)
	if err != nil {
		t.Fatal(err)
	}
	if c.Role != "member" || c.Locale != "en" || c.CompanyKind != "advertiser" {
		t.Errorf("claims after refresh %+v: want role member, locale en", c)
	}
}

func TestRefreshRefusesWhatIsNotARefreshToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tok := f.issue(t)
	_, err := f.m.Refresh(ctx, "")
	wantErr(t, "Refresh of nothing", err, ErrNoCredentials)
	_, err = f.m.Refresh(ctx, "made-up")
	wantErr(t, "Refresh of a made-up token", err, ErrInvalidToken)
	_, err = f.m.Refresh(ctx, tok.Access)
	wantErr(t, "Refresh with an access token", err, ErrInvalidToken)
}

func TestDeleteExpiredRemovesEndedSessionsOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := f.issue(t)
	if _, err := f.m.Refresh(ctx, old.Refresh); err != nil { // leaves a retired token behind
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour)
	young := f.issue(t)
	f.clock.Advance(DefaultRefreshTTL - time.Minute)

	n, err := f.m.DeleteExpired(ctx)
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	var left []string
	rows, _ := f.pool.Query(ctx, `SELECT id FROM sessions UNION ALL SELECT session_id FROM retired_refresh_tokens`)
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		left = append(left, id)
	}
	if rows.Err() != nil || len(left) != 1 || left[0] != young.SessionID {
		t.Fatalf("left %v (%v), want only %s", left, rows.Err(), young.SessionID)
	}
}

func TestStoreFailureIsNotACredentialError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(t)
	f.pool.Close()
	_, err := f.m.Verify(context.Background(), tok.Access)
	if err == nil {
		t.Fatal("Verify succeeded without a database")
	}
	for _, sentinel := range []error{ErrNoCredentials, ErrAPIKeyNotAllowed, ErrInvalidToken, ErrExpired, ErrRevoked, ErrCSRF} {
		if errors.Is(err, sentinel) {
			t.Fatalf("a store failure reads as %v: the HTTP layer would answer 401 instead of 500", sentinel)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	f := newFixture(b)
	tok := f.issue(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.m.Verify(ctx, tok.Access); err != nil {
			b.Fatal(err)
		}
	}
}
