package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/idempotency"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/magiccode"
	"github.com/partnerstream/partnerstream/internal/mailer"
	"github.com/partnerstream/partnerstream/internal/metrics"
	"github.com/partnerstream/partnerstream/internal/oidclogin"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/people"
	"github.com/partnerstream/partnerstream/internal/session"
	"github.com/partnerstream/partnerstream/internal/signin"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
	"github.com/partnerstream/partnerstream/internal/webhooks/kubetest"
)

// The package's tests come in two kinds. Handler tests of HTTP behaviour (credentials,
// validation, status codes, error mapping) run on fakeFixture: in-memory fakes of the
// interfaces the package declares, no services. Journeys that need the real domain services
// (tenant isolation, the main CRUD flows, sign-in, revocation) run on fixture: Postgres,
// an SMTP listener and an OIDC provider, started per test by testenv.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// kube is the envtest control plane of the package's tests (nil without KUBEBUILDER_ASSETS;
// the tests that need it then skip, through kube.Require).
var kube *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &kube)) }

// fixture is the server on real stores, with an advertiser and an affiliate company, each
// with an owner user and an API key.
type fixture struct {
	srv      *httpapi.Server
	sessions *session.Manager
	inbox    *testenv.Inbox
	google   *testenv.Provider
	// skew moves the sessions' clock forward (nanoseconds).
	skew atomic.Int64
	db   *pgxpool.Pool
	ids  *identity.Store
	keys *auth.KeyAuthenticator
	// people is the team and invitation service, e-mailing into inbox; sign-in accepts its
	// team invitations.
	people *people.Service
	advID  string
	affID  string
	adv    string // API key of the advertiser
	aff    string // API key of the affiliate
}

func newFixture(t testing.TB, opts ...func(*httpapi.Options)) *fixture {
	t.Helper()
	ctx := context.Background()
	_, db := pgtest.Migrated(t)
	f := &fixture{db: db, ids: identity.NewStore(db)}
	f.keys = auth.NewKeyAuthenticator(f.ids, auth.KeyAuthOptions{Log: quiet})
	keys, err := session.ParseKeys(session.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	f.sessions = session.NewManager(db, keys, session.Options{Now: func() time.Time { return time.Now().Add(time.Duration(f.skew.Load())) }})
	var m mailer.Mailer
	m, f.inbox = testenv.SMTPMailer(t)
	codes, err := magiccode.NewService(db, m, magiccode.Options{Pepper: keys.Derive("magic-code-pepper")})
	if err != nil {
		t.Fatal(err)
	}
	f.google = testenv.OIDCProvider(t)
	oauth, err := oidclogin.New(ctx, db, []oidclogin.ProviderConfig{{Name: "google", Issuer: f.google.Issuer(),
		ClientID: f.google.ClientID(), ClientSecret: f.google.ClientSecret(), RedirectURL: "http://127.0.0.1:8080/api/auth/oauth/google/callback"}}, oidclogin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := httpapi.Options{Addr: "127.0.0.1:0", Log: quiet, Health: health.NewRegistry(), Keys: f.keys,
		Sessions: httpapi.SessionAuth(f.sessions), Idempotency: idempotency.NewStore(db, nil)}
	for _, fn := range opts {
		fn(&o)
	}
	f.srv = httpapi.New(o)
	f.people = people.NewService(db, m, people.Options{BaseURL: "https://partners.example.test"})
	f.srv.MountAuth(signin.New(f.ids, f.sessions, codes, oauth).WithInvitations(f.people), f.sessions, f.ids, false)
	f.srv.MountAPIKeys(f.ids)
	for _, kind := range []string{identity.Advertiser, identity.Affiliate} {
		co, _, err := f.ids.CreateCompany(ctx, identity.NewCompany{Kind: kind, Name: kind + " co", OwnerEmail: kind + "@example.test"})
		if err != nil {
			t.Fatal(err)
		}
		key, _, err := f.ids.CreateAPIKey(ctx, co.ID, "test")
		if err != nil {
			t.Fatal(err)
		}
		if kind == identity.Advertiser {
			f.advID, f.adv = co.ID, key
		} else {
			f.affID, f.aff = co.ID, key
		}
	}
	return f
}

// newBareFixture is newFixture with a server of its own that has no routes yet (beyond the
// built-in ones): an area's tests mount their services (a control plane, a test clock) on it
// whatever newFixture mounts, since the first handler registered for a route is the one
// that answers.
func newBareFixture(t *testing.T) *fixture {
	t.Helper()
	var opts *httpapi.Options
	f := newFixture(t, func(o *httpapi.Options) { opts = o })
	f.srv = httpapi.New(*opts)
	return f
}

func (f *fixture) do(t *testing.T, method, path string, headers map[string]string, body string) response {
	t.Helper()
	return do(t, f.srv, method, path, headers, body)
}

// dashboardAs returns the headers of a dashboard session of the company's owner user,
// signed in with the given role.
func (f *fixture) dashboardAs(t *testing.T, kind, role string) map[string]string {
	t.Helper()
	u, err := f.ids.UserByEmail(context.Background(), kind+"@example.test")
	if err != nil {
		t.Fatal(err)
	}
	return f.bearer(t, u.ID, u.CompanyID, kind, role)
}

// session returns the headers of a dashboard session of company's owner, with role.
func (f *fixture) session(t *testing.T, companyID, kind, role string) map[string]string {
	t.Helper()
	var user string
	if err := f.db.QueryRow(context.Background(), `SELECT id FROM users WHERE company_id = $1 LIMIT 1`, companyID).Scan(&user); err != nil {
		t.Fatal(err)
	}
	return f.bearer(t, user, companyID, kind, role)
}

// bearer returns the headers of a dashboard session of the user, in its company of kind,
// signed in with role.
func (f *fixture) bearer(t *testing.T, userID, companyID, kind, role string) map[string]string {
	t.Helper()
	tok, err := f.sessions.Issue(context.Background(), session.Subject{UserID: userID, CompanyID: companyID,
		CompanyKind: kind, Role: role, Locale: "en"}, session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"Authorization": "Bearer " + tok.Access}
}

// company makes another company of the kind and returns its id and an API key of it.
func (f *fixture) company(t *testing.T, kind string) (id, key string) {
	t.Helper()
	ctx := context.Background()
	co, _, err := f.ids.CreateCompany(ctx, identity.NewCompany{Kind: kind, Name: "other " + kind, OwnerEmail: ids.New("usr") + "@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if key, _, err = f.ids.CreateAPIKey(ctx, co.ID, "other"); err != nil {
		t.Fatal(err)
	}
	return co.ID, key
}

var sixDigits = regexp.MustCompile(`\b[0-9]{6}\b`)

// code asks for a sign-in code and reads it from the SMTP listener.
func (f *fixture) code(t *testing.T, email string) string {
	t.Helper()
	before := f.inbox.Count(email)
	r := f.do(t, "POST", "/api/auth/magic-code", nil, `{"email":"`+email+`"}`)
	if r.status != 202 {
		t.Fatalf("magic-code: %d %s", r.status, r.raw)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.inbox.Count(email) == before {
		if time.Now().After(deadline) {
			t.Fatalf("no e-mail reached %s", email)
		}
		time.Sleep(10 * time.Millisecond)
	}
	msg := f.inbox.Wait(t, email, time.Second)
	c := sixDigits.FindString(msg.Text)
	if c == "" {
		t.Fatalf("no code in the e-mail: %q", msg.Text)
	}
	return c
}

// signUp registers a company through the magic-code flow and returns the session response.
func (f *fixture) signUp(t *testing.T, email, kind string) response {
	t.Helper()
	r := f.do(t, "POST", "/api/auth/magic-code/verify", nil,
		`{"email":"`+email+`","code":"`+f.code(t, email)+`","company_kind":"`+kind+`","company_name":"Co of `+email+`"}`)
	if r.status != 200 {
		t.Fatalf("sign-up: %d %s", r.status, r.raw)
	}
	return r
}

// fakeFixture is the server on in-memory fakes, with an advertiser and an affiliate
// company, each with an API key. It mounts what newFixture mounts (sign-in, API keys).
type fakeFixture struct {
	srv          *httpapi.Server
	keys         *fakeKeys
	sessions     *fakeSessions
	advID, affID string
	adv, aff     string // API keys
}

func newFakeFixture(t testing.TB, opts ...func(*httpapi.Options)) *fakeFixture {
	t.Helper()
	f := &fakeFixture{keys: &fakeKeys{byKey: map[string]identity.APIKey{}, companies: map[string]identity.Company{}},
		sessions: &fakeSessions{claims: map[string]session.Claims{}}}
	f.advID, f.adv = f.company(identity.Advertiser)
	f.affID, f.aff = f.company(identity.Affiliate)
	o := httpapi.Options{Addr: "127.0.0.1:0", Log: quiet, Health: health.NewRegistry(), Keys: f.keys, Sessions: httpapi.SessionAuth(f.sessions)}
	for _, fn := range opts {
		fn(&o)
	}
	f.srv = httpapi.New(o)
	// No sign-in service: its routes exist, and OAuth knows no provider.
	f.srv.MountAuth(signin.New(nil, nil, nil, nil), f.sessions, nil, false)
	f.srv.MountAPIKeys(f.keys)
	return f
}

func (f *fakeFixture) do(t *testing.T, method, path string, headers map[string]string, body string) response {
	t.Helper()
	return do(t, f.srv, method, path, headers, body)
}

// company adds a company of kind and returns its id and an API key of it.
func (f *fakeFixture) company(kind string) (id, key string) {
	id = ids.New(ids.Company)
	f.keys.mu.Lock()
	f.keys.companies[id] = identity.Company{ID: id, Kind: kind, Name: kind + " co", Locale: "en", CreatedAt: time.Now().UTC()}
	f.keys.mu.Unlock()
	key, _, _ = f.keys.CreateAPIKey(context.Background(), id, "test")
	return id, key
}

// dashboardAs returns the headers of a dashboard session of the company of kind, with role.
func (f *fakeFixture) dashboardAs(kind, role string) map[string]string {
	co := f.advID
	if kind == identity.Affiliate {
		co = f.affID
	}
	token := ids.New("ses")
	f.sessions.mu.Lock()
	defer f.sessions.mu.Unlock()
	f.sessions.claims[token] = session.Claims{UserID: ids.New(ids.User), CompanyID: co, CompanyKind: kind, Role: role, Locale: "en",
		SessionID: token, ExpiresAt: time.Now().Add(time.Hour)}
	return map[string]string{"Authorization": "Bearer " + token}
}

// fakeKeys is the API key store and authenticator: the keys it made authenticate until
// revoked; others are malformed or unknown, as auth.KeyAuthenticator says.
type fakeKeys struct {
	mu        sync.Mutex
	byKey     map[string]identity.APIKey
	companies map[string]identity.Company
}

func (k *fakeKeys) Authenticate(_ context.Context, key string) (auth.KeyRecord, error) {
	if _, err := auth.ParseKey(key); err != nil {
		return auth.KeyRecord{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	rec, ok := k.byKey[key]
	if !ok {
		return auth.KeyRecord{}, auth.ErrUnknownKey
	}
	return auth.KeyRecord{KeyID: rec.ID, CompanyID: rec.CompanyID, CompanyKind: k.companies[rec.CompanyID].Kind}, nil
}

func (k *fakeKeys) CreateAPIKey(_ context.Context, companyID, name string) (string, identity.APIKey, error) {
	key, display, _ := auth.NewKey()
	rec := identity.APIKey{ID: ids.New(ids.APIKey), CompanyID: companyID, Name: name, Prefix: display, CreatedAt: time.Now().UTC(), Kind: identity.KeySecret}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.byKey[key] = rec
	return key, rec, nil
}

// CreatePublishableKey: the fake has no programs.
func (k *fakeKeys) CreatePublishableKey(context.Context, string, string, string) (string, identity.APIKey, error) {
	return "", identity.APIKey{}, identity.ErrNotFound
}

func (k *fakeKeys) ListAPIKeys(_ context.Context, companyID string, _ page.Request) ([]identity.APIKey, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []identity.APIKey
	for _, rec := range k.byKey {
		if rec.CompanyID == companyID {
			out = append(out, rec)
		}
	}
	return out, "", nil
}

func (k *fakeKeys) RevokeAPIKey(_ context.Context, companyID, keyID string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, rec := range k.byKey {
		if rec.ID == keyID && rec.CompanyID == companyID {
			delete(k.byKey, key)
			return "", nil
		}
	}
	return "", identity.ErrNotFound
}

func (k *fakeKeys) CompanyByID(_ context.Context, id string) (identity.Company, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	co, ok := k.companies[id]
	if !ok {
		return identity.Company{}, identity.ErrNotFound
	}
	return co, nil
}

// fakeSessions knows the bearer tokens dashboardAs gave out, and refuses credentials the way
// the session manager does. Its other methods are the sign-in routes' (unused here: they
// would panic on the nil interface).
type fakeSessions struct {
	httpapi.Sessions
	mu     sync.Mutex
	claims map[string]session.Claims
}

func (s *fakeSessions) Authenticate(c *fiber.Ctx) (session.Claims, error) {
	if c.Get("X-Api-Key") != "" {
		return session.Claims{}, session.ErrAPIKeyNotAllowed
	}
	token, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	if !ok {
		return session.Claims{}, session.ErrNoCredentials
	}
	if strings.HasPrefix(token, auth.KeyPrefix) {
		return session.Claims{}, session.ErrAPIKeyNotAllowed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, ok := s.claims[token]
	if !ok {
		return session.Claims{}, session.ErrInvalidToken
	}
	return cl, nil
}

// response is an answer of the server. Tests read its body with decode, into the types
// below or their own; problem is decoded for every answer, since most tests check it.
type response struct {
	status  int
	header  http.Header
	raw     string
	problem problem
}

// do sends a request to srv in process, and checks the answer against openapi.yaml.
func do(t *testing.T, srv *httpapi.Server, method, path string, headers map[string]string, body string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.App().Test(req, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	checkAgainstSpec(t, req, resp.StatusCode, resp.Header, raw)
	out := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(raw, &out.problem)
	}
	return out
}

// decode reads a JSON answer into a T, failing the test on anything else.
func decode[T any](t testing.TB, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.raw), &v); err != nil {
		t.Fatalf("decode %d answer into %T: %v in %.300s", r.status, v, err, r.raw)
	}
	return v
}

// problem is an application/problem+json answer, with the extensions the tests read.
type problem struct {
	Code          string       `json:"code"`
	Detail        string       `json:"detail"`
	RequestID     string       `json:"request_id"`
	Errors        []fieldError `json:"errors"`
	CurrentStatus string       `json:"current_status"`
	Allowed       []string     `json:"allowed"`
	// Failures of a bulk change.
	Failures []struct {
		ID      string   `json:"id"`
		Code    string   `json:"code"`
		Status  string   `json:"status"`
		Allowed []string `json:"allowed"`
	} `json:"failures"`
	// PartnershipStatus is the status of the partnership a tracking link needs.
	PartnershipStatus string `json:"partnership_status"`
	// DeliveryStatus is the status of a delivery a replay refused.
	DeliveryStatus string `json:"delivery_status"`
	// The missing exchange rate.
	Base  string `json:"base"`
	Quote string `json:"quote"`
	Date  string `json:"date"`
}

type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// list is a page of a list route.
type list[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor"`
}

// resource is the part of every resource most tests need.
type resource struct {
	ID string `json:"id"`
}

// idsOf returns the ids of a list answer, failing unless it is a 200.
func idsOf(t *testing.T, r response) []string {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("list = %d %s", r.status, r.raw)
	}
	out := []string{}
	for _, x := range decode[list[resource]](t, r).Data {
		out = append(out, x.ID)
	}
	return out
}

// expect fails unless the answer has status and, if code is set, the problem code.
func expect(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.problem.Code != code) {
		t.Fatalf("got %d %s, want %d %s", r.status, r.raw, status, code)
	}
}

// apiKey returns the headers that send an API key.
func apiKey(k string) map[string]string { return map[string]string{"x-api-key": k} }

// createdKey is the answer that creates an API key, the one that shows the key.
type createdKey struct {
	identity.APIKey
	Key string `json:"key"`
}

// signedIn is the body of a sign-in or refresh answer.
type signedIn struct {
	AccessToken  string           `json:"access_token"`
	RefreshToken string           `json:"refresh_token"`
	Registered   bool             `json:"registered"`
	User         identity.User    `json:"user"`
	Company      identity.Company `json:"company"`
}

func bearerOf(t *testing.T, r response) map[string]string {
	t.Helper()
	return map[string]string{"Authorization": "Bearer " + decode[signedIn](t, r).AccessToken}
}

func cookiesOf(r response) (cookie string, csrf string) {
	var parts []string
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Value == "" {
			continue
		}
		parts = append(parts, c.Name+"="+c.Value)
		if c.Name == session.CSRFCookie {
			csrf = c.Value
		}
	}
	return strings.Join(parts, "; "), csrf
}

// counterValue sums a counter's series in the process's registry.
func counterValue(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
