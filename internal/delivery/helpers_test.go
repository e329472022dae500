package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
	"github.com/partnerstream/partnerstream/internal/webhooks/kubetest"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	os.Exit(kubetest.Run(m, &env))
}

// loopback is the allow-list of the tests: receivers listen on 127.0.0.1.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// newDB returns a migrated database and n companies in it.
func newDB(t testing.TB, n int) (*pgxpool.Pool, []string) {
	t.Helper()
	_, db := pgtest.Migrated(t)
	return db, addCompanies(t, db, n)
}

func addCompanies(t testing.TB, db *pgxpool.Pool, n int) []string {
	t.Helper()
	cos := make([]string, n)
	for i := range cos {
		cos[i] = ids.New(ids.Company)
	}
	if _, err := db.Exec(context.Background(), `INSERT INTO companies (id, kind, name) SELECT id, 'advertiser', 'test' FROM unnest($1::text[]) id`, cos); err != nil {
		t.Fatal(err)
	}
	return cos
}

// subs are webhook subscriptions held in memory, for tests that need no Kubernetes API.
type subs struct {
	mu      sync.Mutex
	targets map[[2]string][]signing.Target
}

func newSubs() *subs { return &subs{targets: map[[2]string][]signing.Target{}} }

func (s *subs) Targets(company, event string) []signing.Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.targets[[2]string{company, event}])
}

func (s *subs) WaitForSync(context.Context) error { return nil }

// add subscribes a new webhook of the company to the events and returns it with its secret.
func (s *subs) add(company, url string, evs ...string) (signing.Target, string) {
	secret := signing.NewSecret()
	key, _ := signing.Key(secret)
	t := signing.Target{ID: ids.New(ids.Webhook), URL: url, Secrets: []signing.HMACKey{{Key: key}}}
	s.put(company, t, evs...)
	return t, secret
}

func (s *subs) put(company string, t signing.Target, evs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range evs {
		k := [2]string{company, e}
		s.targets[k] = slices.DeleteFunc(s.targets[k], func(o signing.Target) bool { return o.ID == t.ID })
		s.targets[k] = append(s.targets[k], t)
	}
}

func (s *subs) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ts := range s.targets {
		s.targets[k] = slices.DeleteFunc(ts, func(o signing.Target) bool { return o.ID == id })
	}
}

// postbackURLs are companies' postback settings held in memory.
type postbackURLs struct {
	mu   sync.Mutex
	urls map[string]string
	keys map[string][]signing.HMACKey
}

func newPostbacks() *postbackURLs {
	return &postbackURLs{urls: map[string]string{}, keys: map[string][]signing.HMACKey{}}
}

func (p *postbackURLs) set(company, url string) string {
	secret := signing.NewSecret()
	key, _ := signing.Key(secret)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.urls[company], p.keys[company] = url, []signing.HMACKey{{Key: key}}
	return secret
}

func (p *postbackURLs) SigningKeys(_ context.Context, company string, _ time.Time) (string, []signing.HMACKey, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u, ok := p.urls[company]
	if !ok {
		return "", nil, postbacks.ErrNotConfigured
	}
	return u, p.keys[company], nil
}

// suspended records the webhooks a 410 suspended.
type suspended struct {
	mu  sync.Mutex
	ids []string
}

func (s *suspended) SuspendWebhook(_ context.Context, _, id, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, id)
	return nil
}

func (s *suspended) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// newService builds a service on db with the tests' defaults (loopback allowed, a dummy
// Kafka address for tests that do not consume).
func newService(t testing.TB, db *pgxpool.Pool, o Options) *Service {
	t.Helper()
	o.DB = db
	if o.Kafka.Brokers == nil {
		o.Kafka = kafka.Config{Brokers: []string{"127.0.0.1:1"}, Partitions: 1, ReplicationFactor: 1, Retention: time.Hour}
	}
	if o.AllowList == nil {
		o.AllowList = loopback
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// request is what a receiver got.
type request struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is an HTTP server on 127.0.0.1 that records every request and answers with
// respond (204 when nil).
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []request
	respond func(w http.ResponseWriter, r *http.Request)
}

func newReceiver(t testing.TB, respond func(w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		h := r.Header.Clone()
		h.Set(pathHeader, r.URL.Path)
		h.Set(queryHeader, r.URL.RawQuery)
		rc.got = append(rc.got, request{header: h, body: body, at: time.Now()})
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// verify checks a request with the Standard Webhooks reference library and the secret;
// checkTime is false when the test's clock is not the real one.
func verify(t testing.TB, r request, secret string, checkTime bool) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if checkTime {
		return wh.Verify(r.body, r.header)
	}
	return wh.VerifyIgnoringTimestamp(r.body, r.header)
}

// envelope is a domain event between two companies.
func envelope(typ, advertiser, affiliate string) events.Envelope {
	data, _ := json.Marshal(events.ConversionData{ID: ids.New(ids.Conversion), Type: "sale", Amount: "42.50", Status: "pending",
		Currency: "EUR", AdvertiserID: advertiser, AffiliateID: affiliate})
	return events.Envelope{ID: ids.New(ids.Event), Type: typ, OccurredAt: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC),
		AdvertiserID: advertiser, AffiliateID: affiliate, ProgramID: ids.New(ids.Program), Data: data}
}

// step claims what is due and attempts it all concurrently, then records the outcomes, as
// the dispatcher does but synchronously.
func (s *Service) step(t testing.TB) []outcome {
	t.Helper()
	ctx := context.Background()
	jobs, err := s.claim(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]outcome, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { outs[i] = s.attempt(ctx, j) })
	}
	wg.Wait()
	if len(outs) > 0 {
		if _, err := s.save(ctx, outs); err != nil {
			t.Fatal(err)
		}
		if err := s.recordHealth(ctx, outs); err != nil {
			t.Fatal(err)
		}
	}
	return outs
}

// row is a deliveries row as the tests read it.
type row struct {
	id, company, kind, target, url, eventID, status, trigger string
	attempts                                                 int
	next                                                     *time.Time
	lastStatus                                               *int
	lastError                                                *string
}

func rows(t testing.TB, db *pgxpool.Pool, where string, args ...any) []row {
	t.Helper()
	rs, err := db.Query(context.Background(), `SELECT id, company_id, kind, target_id, url, event_id, status, next_trigger, attempts,
		next_attempt_at, last_status, last_error FROM deliveries `+where+` ORDER BY id`, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.id, &r.company, &r.kind, &r.target, &r.url, &r.eventID, &r.status, &r.trigger, &r.attempts,
			&r.next, &r.lastStatus, &r.lastError); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// attemptRow is a delivery_attempts row.
type attemptRow struct {
	n          int
	trigger    string
	startedAt  time.Time
	durationMS int
	code       *int
	err        *string
	excerpt    *string
}

func attemptsOf(t testing.TB, db *pgxpool.Pool, id string) []attemptRow {
	t.Helper()
	rs, err := db.Query(context.Background(), `SELECT n, trigger, started_at, duration_ms, status_code, error, response_excerpt
		FROM delivery_attempts WHERE delivery_id = $1 ORDER BY n`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []attemptRow
	for rs.Next() {
		var a attemptRow
		if err := rs.Scan(&a.n, &a.trigger, &a.startedAt, &a.durationMS, &a.code, &a.err, &a.excerpt); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func deref[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

// eventually is testenv.Eventually for conditions that say what is missing as an error.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, func() (bool, string) {
		err := cond()
		return err == nil, fmt.Sprint(err)
	})
}

func migratedWithURL(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	return pgtest.Migrated(t)
}

func testenvKafka(t testing.TB) []string { return testenv.Kafka(t) }
