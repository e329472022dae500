package postbacks_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

type fixture struct {
	svc  *postbacks.Service
	db   *pgxpool.Pool
	now  time.Time
	a, b string // two companies
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	_, db := pgtest.Migrated(t)
	f := &fixture{db: db, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	f.svc = postbacks.NewService(db, postbacks.Options{Now: func() time.Time { return f.now }})
	ids := identity.NewStore(db)
	for i, co := range []*string{&f.a, &f.b} {
		c, _, err := ids.CreateCompany(ctx, identity.NewCompany{Kind: identity.Advertiser, Name: "co", OwnerEmail: string(rune('a'+i)) + "@example.test"})
		if err != nil {
			t.Fatal(err)
		}
		*co = c.ID
	}
	return f
}

func ptr(s string) *string { return &s }

func (f *fixture) setURL(t *testing.T, company, u string) string {
	t.Helper()
	_, secret, err := f.svc.SetURL(context.Background(), company, &u)
	if err != nil {
		t.Fatalf("set URL %q: %v", u, err)
	}
	return secret
}

func key(t *testing.T, secret string) []byte {
	t.Helper()
	k, err := signing.Key(secret)
	if err != nil {
		t.Fatalf("secret %q...: %v", secret[:min(len(secret), 8)], err)
	}
	return k
}

func TestTheFirstURLCreatesTheSecretAndShowsItOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	if s, err := f.svc.Get(ctx, f.a); err != nil || s.URL != nil || s.SecretCreatedAt != nil {
		t.Fatalf("before any URL: %+v, %v", s, err)
	}
	set, secret, err := f.svc.SetURL(ctx, f.a, ptr("https://receiver.example/postbacks"))
	if err != nil {
		t.Fatal(err)
	}
	first := key(t, secret)
	if set.URL == nil || *set.URL != "https://receiver.example/postbacks" || set.SecretCreatedAt == nil || !set.SecretCreatedAt.Equal(f.now) {
		t.Fatalf("settings after the first URL: %+v", set)
	}
	f.now = f.now.Add(time.Minute)
	if again := f.setURL(t, f.a, "https://other.example/pb"); again != "" {
		t.Fatal("changing the URL showed the secret again")
	}
	u, keys, err := f.svc.SigningKeys(ctx, f.a, f.now)
	if err != nil || u != "https://other.example/pb" || len(keys) != 1 || !bytes.Equal(keys[0].Key, first) {
		t.Fatalf("signing keys = %q %d keys %v; want the new URL with the first secret", u, len(keys), err)
	}
	got, err := f.svc.Get(ctx, f.a)
	if err != nil || *got.URL != "https://other.example/pb" || !got.SecretCreatedAt.Equal(f.now.Add(-time.Minute)) || !got.UpdatedAt.Equal(f.now) {
		t.Fatalf("get = %+v, %v", got, err)
	}
}

func TestRemovingTheURLStopsPostbacksAndKeepsTheSecret(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if s, secret, err := f.svc.SetURL(ctx, f.a, nil); err != nil || secret != "" || s.URL != nil {
		t.Fatalf("removing a URL never set: %+v %q %v", s, secret, err)
	}
	if _, _, err := f.svc.SigningKeys(ctx, f.a, f.now); !errors.Is(err, postbacks.ErrNotConfigured) {
		t.Fatalf("keys without settings: %v", err)
	}
	first := key(t, f.setURL(t, f.a, "https://receiver.example/pb"))
	s, secret, err := f.svc.SetURL(ctx, f.a, nil)
	if err != nil || secret != "" || s.URL != nil || s.SecretCreatedAt == nil {
		t.Fatalf("remove: %+v %v", s, err)
	}
	if _, _, err := f.svc.SigningKeys(ctx, f.a, f.now); !errors.Is(err, postbacks.ErrNotConfigured) {
		t.Fatalf("keys without a URL: %v", err)
	}
	if again := f.setURL(t, f.a, "https://receiver.example/pb"); again != "" {
		t.Fatal("setting a URL again made a new secret")
	}
	if _, keys, err := f.svc.SigningKeys(ctx, f.a, f.now); err != nil || !bytes.Equal(keys[0].Key, first) {
		t.Fatalf("the secret changed across removing the URL: %v", err)
	}
}

func TestTheURLFollowsTheWebhookRule(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name, url, wantErr string
	}{
		{"https is accepted", "https://receiver.example/pb?x=1", ""},
		{"http to localhost is accepted for development", "http://localhost:8080/pb", ""},
		{"http to 127.0.0.1 is accepted", "http://127.0.0.1:9/pb", ""},
		{"http to [::1] is accepted", "http://[::1]:9/pb", ""},
		{"http to a public host is refused", "http://receiver.example/pb", "url must use https://"},
		{"http to a host that starts like localhost is refused", "http://localhost.evil.example/", "url must use https://"},
		{"another scheme is refused", "ftp://receiver.example/", "url must use https://"},
		{"a relative URL is refused", "/pb", "url must be an absolute URL with a host"},
		{"credentials are refused", "https://user:pw@receiver.example/pb", "url must not contain credentials"},
		{"a user name alone is refused", "https://token@receiver.example/pb", "url must not contain credentials"},
		{"an empty URL is refused", "", "url must be an absolute URL with a host"},
		{"a URL without a host is refused", "https:///pb", "url must be an absolute URL with a host"},
		{"a port beyond 65535 is refused", "http://127.0.0.1:99999/x", "url must have a port from 1 to 65535"},
		{"a raw space is refused", "https://receiver.example/a b", "url must not contain spaces or control characters"},
		{"a percent-encoded space is fine", "https://receiver.example/a%20b", ""},
		{"placeholders in the path and query are accepted", "https://receiver.example/pb/{status}?cid={click_id}&a={amount}&s={sub1}", ""},
		{"an unknown placeholder is refused", "https://receiver.example/pb?x={payout}", "unknown placeholder {payout}"},
		{"an unmatched brace is refused", "https://receiver.example/pb?x={click_id", "unmatched brace"},
		{"a closing brace alone is refused", "https://receiver.example/pb?x=click_id}", "unmatched brace"},
		{"a URL over 2048 characters is refused", "https://receiver.example/" + strings.Repeat("a", 2048), "at most 2048 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := f.svc.SetURL(context.Background(), f.a, &c.url)
			var ve *postbacks.ValidationError
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.wantErr != "" && (!errors.As(err, &ve) || ve.Field != "url" || !strings.Contains(ve.Message, c.wantErr)):
				t.Fatalf("error = %v, want a url ValidationError with %q", err, c.wantErr)
			}
		})
	}
}

func TestRotationKeepsThePreviousSecretForTheGracePeriod(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, _, err := f.svc.RotateSecret(ctx, f.a, time.Hour); !errors.Is(err, postbacks.ErrNotConfigured) {
		t.Fatalf("rotation before any URL: %v", err)
	}
	first := key(t, f.setURL(t, f.a, "https://receiver.example/pb"))

	rotatedAt := f.now.Add(time.Minute)
	f.now = rotatedAt
	s, secret, err := f.svc.RotateSecret(ctx, f.a, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	second := key(t, secret)
	if bytes.Equal(first, second) {
		t.Fatal("rotation kept the same secret")
	}
	expiry := rotatedAt.Add(time.Hour)
	if !s.SecretCreatedAt.Equal(rotatedAt) || s.PreviousSecretExpiresAt == nil || !s.PreviousSecretExpiresAt.Equal(expiry) {
		t.Fatalf("settings after rotation: %+v", s)
	}
	cases := []struct {
		name string
		at   time.Time
		want [][]byte
	}{
		{"right after the rotation both sign, the new one first", rotatedAt, [][]byte{second, first}},
		{"a second before the expiry both sign", expiry.Add(-time.Second), [][]byte{second, first}},
		{"at the expiry only the new one signs", expiry, [][]byte{second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, keys, err := f.svc.SigningKeys(ctx, f.a, c.at)
			if err != nil || len(keys) != len(c.want) {
				t.Fatalf("%d keys, %v; want %d", len(keys), err, len(c.want))
			}
			for i := range keys {
				if !bytes.Equal(keys[i].Key, c.want[i]) {
					t.Fatalf("key %d is not the expected one", i)
				}
			}
			if len(keys) == 2 && !keys[1].ExpiresAt.Equal(expiry) {
				t.Fatalf("previous key expires at %v, want %v", keys[1].ExpiresAt, expiry)
			}
		})
	}

	f.now = expiry
	if s, _ := f.svc.Get(ctx, f.a); s.PreviousSecretExpiresAt != nil {
		t.Fatalf("an expired previous secret is still shown: %v", s.PreviousSecretExpiresAt)
	}
	if n, err := f.svc.PruneExpired(ctx); err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want 1", n, err)
	}
	var left int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM company_postbacks WHERE previous_secret IS NOT NULL`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d previous secrets left after pruning (%v)", left, err)
	}
}

func TestARotationWithoutGraceDropsThePreviousSecretAtOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.setURL(t, f.a, "https://receiver.example/pb")
	if _, _, err := f.svc.RotateSecret(ctx, f.a, time.Hour); err != nil {
		t.Fatal(err)
	}
	// The leaked secret is the current one: a second rotation with 0 drops it and any older one.
	s, secret, err := f.svc.RotateSecret(ctx, f.a, 0)
	if err != nil || s.PreviousSecretExpiresAt != nil {
		t.Fatalf("rotation with 0 grace: %+v, %v", s, err)
	}
	_, keys, err := f.svc.SigningKeys(ctx, f.a, f.now)
	if err != nil || len(keys) != 1 || !bytes.Equal(keys[0].Key, key(t, secret)) {
		t.Fatalf("keys after a rotation without grace: %d, %v", len(keys), err)
	}
}

func TestTheGracePeriodIsBounded(t *testing.T) {
	f := newFixture(t)
	f.setURL(t, f.a, "https://receiver.example/pb")
	for _, grace := range []time.Duration{-time.Second, postbacks.MaxGrace + time.Second} {
		_, _, err := f.svc.RotateSecret(context.Background(), f.a, grace)
		var ve *postbacks.ValidationError
		if !errors.As(err, &ve) || ve.Field != "grace_period_seconds" {
			t.Errorf("grace %v: %v, want a ValidationError", grace, err)
		}
	}
	if _, _, err := f.svc.RotateSecret(context.Background(), f.a, postbacks.MaxGrace); err != nil {
		t.Errorf("the maximum grace: %v", err)
	}
}

func TestACompanySeesOnlyItsOwnSettings(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.setURL(t, f.a, "https://a.example/pb")
	if s, err := f.svc.Get(ctx, f.b); err != nil || s.URL != nil {
		t.Fatalf("the other company sees %+v, %v", s, err)
	}
	if _, _, err := f.svc.SigningKeys(ctx, f.b, f.now); !errors.Is(err, postbacks.ErrNotConfigured) {
		t.Fatalf("the other company's keys: %v", err)
	}
	if _, _, err := f.svc.RotateSecret(ctx, f.b, time.Hour); !errors.Is(err, postbacks.ErrNotConfigured) {
		t.Fatalf("the other company rotated: %v", err)
	}
	bSecret := f.setURL(t, f.b, "https://b.example/pb")
	_, aKeys, _ := f.svc.SigningKeys(ctx, f.a, f.now)
	if bSecret == "" || bytes.Equal(aKeys[0].Key, key(t, bSecret)) {
		t.Fatal("the companies share a secret")
	}
	if s, _ := f.svc.Get(ctx, f.a); *s.URL != "https://a.example/pb" {
		t.Fatalf("the other company's URL changed this one's: %v", *s.URL)
	}
}

func TestExpandURLFillsEveryPlaceholderAndLeavesOtherURLsAlone(t *testing.T) {
	body, _ := events.WebhookBody(events.Envelope{Type: events.CommissionStatusChanged, OccurredAt: time.Now(),
		Data: []byte(`{"id":"cnv_1","status":"approved","amount":"10.00","commission_amount":"1.00","currency":"USD","click_id":"clk_1","sub1":"a/b c","external_id":"o-1","program_id":"prg_1","affiliate_id":"co_1",
			"country":"DE","device_type":"mobile","risk":{"held":true,"reasons":[{"code":"conversion_too_fast","action":"hold","value":"2s"},{"code":"self_referral","action":"hold","value":"affiliate_user_email"}]}}`)})
	cases := []struct{ name, url, want string }{
		{"every placeholder", "https://r.example/p?" + placeholderQuery(), "https://r.example/p?click_id=clk_1&sub1=a%2Fb%20c&amount=10.00&commission=1.00&currency=USD&status=approved&conversion_id=cnv_1&external_id=o-1&program_id=prg_1&affiliate_id=co_1&reason_codes=conversion_too_fast%2Cself_referral&country=DE&device=mobile"},
		{"no placeholder", "https://r.example/p?x=1", "https://r.example/p?x=1"},
		{"a placeholder twice", "https://r.example/{status}/{status}", "https://r.example/approved/approved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := postbacks.ExpandURL(c.url, body); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
	if got := postbacks.ExpandURL("https://r.example/{status}", []byte("not json")); got != "https://r.example/{status}" {
		t.Fatalf("a body that is not an event changed the URL to %s", got)
	}
}

func placeholderQuery() string {
	var parts []string
	for _, name := range postbacks.Placeholders {
		parts = append(parts, name+"={"+name+"}")
	}
	return strings.Join(parts, "&")
}
