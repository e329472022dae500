package magiccode_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/magiccode"
	"github.com/partnerstream/partnerstream/internal/mailer"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

const (
	wait     = 5 * time.Second
	clientIP = "203.0.113.7"
)

var pepper = []byte("test pepper of at least thirty-two bytes!")

// database returns a pool on a fresh, migrated database.
func database(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.URL(t)
	// More connections than the default (max(4, CPUs)) let the concurrency tests really race.
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "16")
	u.RawQuery = q.Encode()
	pool, err := pgstore.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// smtpMailer sends to a testenv SMTP server.
func smtpMailer(t *testing.T) (mailer.Mailer, *testenv.Inbox) {
	t.Helper()
	addr, inbox := testenv.SMTP(t)
	return mailerTo(t, addr), inbox
}

func mailerTo(t *testing.T, addr string) mailer.Mailer {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mailer.NewSMTP(mailer.SMTPConfig{Host: host, Port: p, TLS: mailer.TLSNone, From: "no-reply@partnerstream.test", Timeout: wait})
	if err != nil {
		t.Fatalf("NewSMTP: %v", err)
	}
	return m
}

func service(t *testing.T, db *pgxpool.Pool, m mailer.Mailer, c *testenv.Clock, change func(*magiccode.Options)) *magiccode.Service {
	t.Helper()
	opts := magiccode.Options{Pepper: pepper, Now: c.Now}
	if change != nil {
		change(&opts)
	}
	s, err := magiccode.NewService(db, m, opts)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return s
}

// fixture is a service on a fresh database that mails through a real SMTP server.
type fixture struct {
	db    *pgxpool.Pool
	svc   *magiccode.Service
	inbox *testenv.Inbox
	clock *testenv.Clock
}

func newFixture(t *testing.T, change func(*magiccode.Options)) *fixture {
	t.Helper()
	db := database(t)
	m, inbox := smtpMailer(t)
	c := testenv.NewClock()
	return &fixture{db: db, svc: service(t, db, m, c, change), inbox: inbox, clock: c}
}

var codePattern = regexp.MustCompile(`\b\d{6}\b`)

// request asks for a code for email and returns it as it arrived by e-mail.
func (f *fixture) request(t *testing.T, email string) string {
	t.Helper()
	if err := f.svc.Request(context.Background(), email, clientIP, "en"); err != nil {
		t.Fatalf("Request(%s): %v", email, err)
	}
	return codeIn(t, f.inbox.Wait(t, email, wait).Text)
}

func codeIn(t *testing.T, text string) string {
	t.Helper()
	codes := codePattern.FindAllString(text, -1)
	if len(codes) != 1 {
		t.Fatalf("want one 6-digit code in the e-mail, found %q in %q", codes, text)
	}
	return codes[0]
}

// wrong returns a well-formed code that is not code.
func wrong(code string) string {
	n, _ := strconv.Atoi(code)
	return fmt.Sprintf("%06d", (n+1)%1_000_000)
}

// state is the stored row of the address's current code.
type state struct {
	attempts int
	locked   bool
}

func current(t *testing.T, db *pgxpool.Pool, email string) (state, bool) {
	t.Helper()
	var s state
	err := db.QueryRow(context.Background(), `SELECT attempts, locked_at IS NOT NULL FROM magic_codes
		WHERE email = $1 AND consumed_at IS NULL AND revoked_at IS NULL`, email).Scan(&s.attempts, &s.locked)
	if err != nil {
		return state{}, false
	}
	return s, true
}

func TestCodeArrivesBySMTPAndSignsIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	if err := f.svc.Request(ctx, "  Ana.Lopez@Example.COM ", clientIP, "en"); err != nil {
		t.Fatalf("Request: %v", err)
	}
	msg := f.inbox.Wait(t, "ana.lopez@example.com", wait)
	if msg.Subject != "Your PartnerStream sign-in code" {
		t.Errorf("subject = %q", msg.Subject)
	}
	if !strings.Contains(msg.Text, "valid for 10 minutes") {
		t.Errorf("text does not give the validity: %q", msg.Text)
	}
	code := codeIn(t, msg.Text)
	got, err := f.svc.Verify(ctx, "ANA.LOPEZ@example.com", " "+code+" ", nil)
	if err != nil || got != "ana.lopez@example.com" {
		t.Fatalf("Verify = %q, %v; want the normalised address", got, err)
	}
	if _, err := f.svc.Verify(ctx, "ana.lopez@example.com", code, nil); !errors.Is(err, magiccode.ErrInvalidCode) {
		t.Fatalf("Verify of a used code = %v, want ErrInvalidCode", err)
	}
}

func TestCodesExpire(t *testing.T) {
	t.Parallel()
	db := database(t)
	m, inbox := smtpMailer(t)
	tests := []struct {
		name    string
		elapsed time.Duration
		want    error
	}{
		{"a code one second before its TTL works", 10*time.Minute - time.Second, nil},
		{"a code at its TTL fails", 10 * time.Minute, magiccode.ErrInvalidCode},
		{"a code an hour old fails", time.Hour, magiccode.ErrInvalidCode},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testenv.NewClock()
			svc := service(t, db, m, c, nil)
			email := fmt.Sprintf("expiry%d@example.com", i)
			if err := svc.Request(context.Background(), email, clientIP, "en"); err != nil {
				t.Fatalf("Request: %v", err)
			}
			code := codeIn(t, inbox.Wait(t, email, wait).Text)
			c.Advance(tt.elapsed)
			if _, err := svc.Verify(context.Background(), email, code, nil); !errors.Is(err, tt.want) {
				t.Fatalf("Verify after %v = %v, want %v", tt.elapsed, err, tt.want)
			}
		})
	}
}

func TestWrongCodesLockTheCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	const email = "bruno@example.com"
	code := f.request(t, email)
	for i := 1; i < magiccode.DefaultMaxAttempts; i++ {
		if _, err := f.svc.Verify(ctx, email, wrong(code), nil); !errors.Is(err, magiccode.ErrInvalidCode) {
			t.Fatalf("wrong try %d = %v, want ErrInvalidCode", i, err)
		}
	}
	if _, err := f.svc.Verify(ctx, email, wrong(code), nil); !errors.Is(err, magiccode.ErrLocked) {
		t.Fatalf("wrong try %d = %v, want ErrLocked", magiccode.DefaultMaxAttempts, err)
	}
	if _, err := f.svc.Verify(ctx, email, code, nil); !errors.Is(err, magiccode.ErrLocked) {
		t.Fatalf("right code after the lock = %v, want ErrLocked", err)
	}

	// A new code starts afresh.
	f.clock.Advance(time.Minute)
	code = f.request(t, email)
	if _, err := f.svc.Verify(ctx, email, code, nil); err != nil {
		t.Fatalf("Verify of a new code after a lock: %v", err)
	}
}

func TestConcurrentWrongTriesAllCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	// Several codes at once, each under a burst of wrong tries released together, so that a
	// lost update of the attempt count shows in nearly every run.
	const codes, tries = 4, 12
	type result struct {
		email string
		err   error
	}
	results := make(chan result, codes*tries)
	start := make(chan struct{})
	var wg sync.WaitGroup
	right := map[string]string{}
	for i := range codes {
		email := fmt.Sprintf("carla%d@example.com", i)
		right[email] = f.request(t, email)
		for range tries {
			wg.Go(func() {
				<-start
				_, err := f.svc.Verify(context.Background(), email, wrong(right[email]), nil)
				results <- result{email, err}
			})
		}
	}
	close(start)
	wg.Wait()
	close(results)
	invalid, locked := map[string]int{}, map[string]int{}
	for r := range results {
		switch {
		case errors.Is(r.err, magiccode.ErrInvalidCode):
			invalid[r.email]++
		case errors.Is(r.err, magiccode.ErrLocked):
			locked[r.email]++
		default:
			t.Fatalf("Verify = %v", r.err)
		}
	}
	max := magiccode.DefaultMaxAttempts
	for email, code := range right {
		if invalid[email] != max-1 || locked[email] != tries-max+1 {
			t.Errorf("%s: %d concurrent wrong tries gave %d ErrInvalidCode and %d ErrLocked, want %d and %d",
				email, tries, invalid[email], locked[email], max-1, tries-max+1)
		}
		if s, _ := current(t, f.db, email); s.attempts != max || !s.locked {
			t.Errorf("%s: stored code %+v, want %d attempts and locked", email, s, max)
		}
		if _, err := f.svc.Verify(context.Background(), email, code, nil); !errors.Is(err, magiccode.ErrLocked) {
			t.Errorf("%s: right code after the lock = %v, want ErrLocked", email, err)
		}
	}
}

func TestMalformedCodesFailWithoutCounting(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const email = "dario@example.com"
	code := f.request(t, email)
	for _, bad := range []string{"", "12345", "1234567", "12 345", "abcdef", "１２３４５６"} {
		if _, err := f.svc.Verify(context.Background(), email, bad, nil); !errors.Is(err, magiccode.ErrInvalidCode) {
			t.Errorf("Verify(%q) = %v, want ErrInvalidCode", bad, err)
		}
	}
	if s, _ := current(t, f.db, email); s.attempts != 0 {
		t.Errorf("malformed codes counted %d attempts", s.attempts)
	}
	if _, err := f.svc.Verify(context.Background(), email, code, nil); err != nil {
		t.Fatalf("Verify of the right code: %v", err)
	}
}

func TestNewCodeReplacesThePreviousOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const email = "elena@example.com"
	first := f.request(t, email)
	second := f.request(t, email)
	if first == second {
		// One chance in a million: the check below would pass for the wrong reason.
		t.Skip("both codes drawn equal")
	}
	if _, err := f.svc.Verify(context.Background(), email, first, nil); !errors.Is(err, magiccode.ErrInvalidCode) {
		t.Fatalf("Verify of the replaced code = %v, want ErrInvalidCode", err)
	}
	if _, err := f.svc.Verify(context.Background(), email, second, nil); err != nil {
		t.Fatalf("Verify of the newest code: %v", err)
	}
}

func TestRateLimitPerAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *magiccode.Options) { o.PerAddressLimit = magiccode.Limit{Max: 3, Window: 15 * time.Minute} })
	ctx := context.Background()
	const email = "fabio@example.com"
	var last string
	for range 3 {
		last = f.request(t, email)
		f.clock.Advance(time.Minute)
	}
	limited := func(retry time.Duration) {
		t.Helper()
		var limited *magiccode.RateLimitError
		if err := f.svc.Request(ctx, email, "198.51.100.1", "en"); !errors.As(err, &limited) || limited.RetryAfter != retry {
			t.Fatalf("Request over the limit = %v, want a RateLimitError with RetryAfter %v", err, retry)
		}
	}
	// Three codes at 0, 1 and 2 minutes; now is 3 minutes: the first leaves the window at 15.
	limited(12 * time.Minute)
	if n := f.inbox.Count(email); n != 3 {
		t.Fatalf("%d e-mails sent, want 3: a refused request must not send", n)
	}
	// A refused request leaves the current code alone.
	if _, err := f.svc.Verify(ctx, email, last, nil); err != nil {
		t.Fatalf("Verify of the last code sent: %v", err)
	}
	f.clock.Advance(12*time.Minute - time.Second)
	limited(time.Second)
	f.clock.Advance(time.Second)
	f.request(t, email)
}

func TestConcurrentRequestsCannotOvershootTheLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *magiccode.Options) { o.PerAddressLimit = magiccode.Limit{Max: 3, Window: 15 * time.Minute} })
	const email, requests = "mia@example.com", 10
	errs := make(chan error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			errs <- f.svc.Request(context.Background(), email, fmt.Sprintf("198.51.100.%d", i+1), "en")
		})
	}
	wg.Wait()
	close(errs)
	var sent, limited int
	for err := range errs {
		var rl *magiccode.RateLimitError
		switch {
		case err == nil:
			sent++
		case errors.As(err, &rl):
			limited++
		default:
			t.Errorf("Request = %v", err)
		}
	}
	if sent != 3 || limited != requests-3 || f.inbox.Count(email) != 3 {
		t.Fatalf("%d concurrent requests: %d sent, %d limited, %d e-mails; want 3, %d, 3",
			requests, sent, limited, f.inbox.Count(email), requests-3)
	}
}

func TestRateLimitPerIP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *magiccode.Options) { o.PerIPLimit = magiccode.Limit{Max: 2, Window: 15 * time.Minute} })
	tests := []struct {
		name        string
		ips         []string // two requests within the limit, then one more
		thirdPasses bool
	}{
		{"one IPv4 address is limited", []string{"192.0.2.1", "192.0.2.1", "192.0.2.1"}, false},
		{"another IPv4 address has its own count", []string{"192.0.2.2", "192.0.2.2", "192.0.2.3"}, true},
		{"an IPv4-mapped IPv6 address counts as the IPv4 one", []string{"192.0.2.4", "192.0.2.4", "::ffff:192.0.2.4"}, false},
		{"one IPv6 /64 is limited as a whole", []string{"2001:db8:1:1::1", "2001:db8:1:1::2", "2001:db8:1:1:ffff::3"}, false},
		{"another IPv6 /64 has its own count", []string{"2001:db8:1:2::1", "2001:db8:1:2::1", "2001:db8:1:3::1"}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for j, ip := range tt.ips {
				// A new address each time: only the IP limit can refuse.
				err := f.svc.Request(context.Background(), fmt.Sprintf("ip%d-%d@example.com", i, j), ip, "en")
				var limited *magiccode.RateLimitError
				switch {
				case j < 2 || tt.thirdPasses:
					if err != nil {
						t.Fatalf("request %d from %s: %v", j+1, ip, err)
					}
				case !errors.As(err, &limited) || limited.RetryAfter != 15*time.Minute:
					t.Fatalf("request %d from %s = %v, want a RateLimitError with RetryAfter 15m", j+1, ip, err)
				}
			}
		})
	}
}

// The service knows nothing of accounts: a registered and an unknown address get the same
// answer, the same e-mail and the same stored row.
func TestKnownAndUnknownAddressesAreTreatedAlike(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	if _, err := f.db.Exec(ctx, `INSERT INTO companies (id, kind, name) VALUES ('co_known', 'advertiser', 'Known Inc');
		INSERT INTO users (id, company_id, email, role) VALUES ('usr_known', 'co_known', 'known@example.com', 'owner')`); err != nil {
		t.Fatalf("create the known user: %v", err)
	}
	type outcome struct {
		requestErr      error
		subject, text   string
		stored          state
		verified        string
		verifyErr       error
		messagesPerUser int
	}
	observe := func(email string) outcome {
		var o outcome
		o.requestErr = f.svc.Request(ctx, email, clientIP, "en")
		msg := f.inbox.Wait(t, email, wait)
		code := codeIn(t, msg.Text)
		o.subject, o.text = msg.Subject, strings.Replace(msg.Text, code, "<code>", 1)
		o.stored, _ = current(t, f.db, email)
		o.messagesPerUser = f.inbox.Count(email)
		o.verified, o.verifyErr = f.svc.Verify(ctx, email, code, nil)
		o.verified = strings.Replace(o.verified, email, "<email>", 1)
		return o
	}
	known, unknown := observe("known@example.com"), observe("nobody@example.com")
	if known != unknown {
		t.Fatalf("known address: %+v\nunknown address: %+v", known, unknown)
	}
	if known.requestErr != nil || known.verifyErr != nil || known.messagesPerUser != 1 {
		t.Fatalf("outcome %+v, want a sent and verified code", known)
	}
}

func TestLocaleChoosesTheLanguage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	english := []string{"Your PartnerStream sign-in code", "valid for 10 minutes"}
	spanish := []string{"Tu código de acceso a PartnerStream", "Es válido durante 10 minutos"}
	tests := []struct {
		locale string
		want   []string
	}{
		{"en", english},
		{"es", spanish},
		{"es-MX", spanish},
		{"ES_ar", spanish},
		{"fr", english},
		{"", english},
	}
	for i, tt := range tests {
		t.Run("locale "+tt.locale, func(t *testing.T) {
			email := fmt.Sprintf("locale%d@example.com", i)
			if err := f.svc.Request(context.Background(), email, clientIP, tt.locale); err != nil {
				t.Fatalf("Request: %v", err)
			}
			msg := f.inbox.Wait(t, email, wait)
			if msg.Subject != tt.want[0] || !strings.Contains(msg.Text, tt.want[1]) {
				t.Fatalf("subject %q, text %q; want %q and %q", msg.Subject, msg.Text, tt.want[0], tt.want[1])
			}
		})
	}
}

// failingMailer is an SMTP server that takes the message and then fails, as one that drops
// the connection after DATA would: the code left the process, yet must not work.
type failingMailer struct {
	mu   sync.Mutex
	sent []mailer.Message
}

func (m *failingMailer) Send(_ context.Context, msg mailer.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, msg)
	return errors.New("connection reset after DATA")
}

func TestFailedSendLeavesNoUsableCode(t *testing.T) {
	t.Parallel()
	db := database(t)
	ctx := context.Background()

	t.Run("when the SMTP server is down", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		svc := service(t, db, mailerTo(t, addr), testenv.NewClock(), nil)
		const email = "gina@example.com"
		err = svc.Request(ctx, email, clientIP, "en")
		var limited *magiccode.RateLimitError
		if err == nil || errors.As(err, &limited) || errors.Is(err, magiccode.ErrInvalidEmail) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("Request = %v, want the send error naming %s", err, addr)
		}
		if s, ok := current(t, db, email); ok {
			t.Fatalf("a usable code is stored: %+v", s)
		}
	})

	t.Run("when the server fails after taking the message", func(t *testing.T) {
		m := &failingMailer{}
		svc := service(t, db, m, testenv.NewClock(), nil)
		const email = "hugo@example.com"
		if err := svc.Request(ctx, email, clientIP, "en"); err == nil || !strings.Contains(err.Error(), "after DATA") {
			t.Fatalf("Request = %v, want the send error", err)
		}
		if len(m.sent) != 1 {
			t.Fatalf("%d messages handed to the mailer", len(m.sent))
		}
		if _, err := svc.Verify(ctx, email, codeIn(t, m.sent[0].Text), nil); !errors.Is(err, magiccode.ErrInvalidCode) {
			t.Fatalf("Verify of the code whose e-mail failed = %v, want ErrInvalidCode", err)
		}
	})
}

func TestRequestRejectsInvalidInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tests := []struct {
		name, email, ip string
		want            error
	}{
		{"an empty address", "", clientIP, magiccode.ErrInvalidEmail},
		{"an address without @", "ines.example.com", clientIP, magiccode.ErrInvalidEmail},
		{"an address with a display name", "Ines <ines@example.com>", clientIP, magiccode.ErrInvalidEmail},
		{"two addresses", "ines@example.com, juan@example.com", clientIP, magiccode.ErrInvalidEmail},
		{"an address with a line break", "ines@example.com\r\nBcc: x@example.com", clientIP, magiccode.ErrInvalidEmail},
		{"an address over 254 bytes", strings.Repeat("a", 64) + "@" + strings.Repeat("b", 190) + ".com", clientIP, magiccode.ErrInvalidEmail},
		{"an IP that is not one", "ines@example.com", "not-an-ip", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.svc.Request(context.Background(), tt.email, tt.ip, "en")
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Request = %v, want %v", err, tt.want)
			}
		})
	}
	var n int
	if err := f.db.QueryRow(context.Background(), `SELECT count(*) FROM magic_codes`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d codes stored (%v), want none", n, err)
	}
}

func TestThePepperKeysTheStoredCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const email = "julia@example.com"
	code := f.request(t, email)
	other := service(t, f.db, nil, f.clock, func(o *magiccode.Options) { o.Pepper = []byte(strings.Repeat("x", 32)) })
	if _, err := other.Verify(context.Background(), email, code, nil); !errors.Is(err, magiccode.ErrInvalidCode) {
		t.Fatalf("Verify under another pepper = %v, want ErrInvalidCode", err)
	}
	var stored []byte
	if err := f.db.QueryRow(context.Background(), `SELECT code_hash FROM magic_codes WHERE email = $1`, email).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), code) {
		t.Fatal("the code is stored in clear")
	}
}

func TestNewServiceRejectsAShortPepper(t *testing.T) {
	t.Parallel()
	_, err := magiccode.NewService(nil, nil, magiccode.Options{Pepper: make([]byte, 31)})
	if err == nil || !strings.Contains(err.Error(), "pepper") {
		t.Fatalf("NewService = %v, want a pepper error", err)
	}
}

func TestPruneDeletesOnlyRowsPastEveryWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	f.request(t, "karl@example.com")
	f.clock.Advance(10 * time.Minute)
	f.request(t, "lena@example.com")
	f.clock.Advance(6 * time.Minute)
	if _, err := f.svc.Prune(ctx, time.Minute); err == nil {
		t.Fatal("Prune within the rate-limit window succeeded")
	}
	n, err := f.svc.Prune(ctx, 15*time.Minute)
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the one row older than 15 minutes", n, err)
	}
	if _, ok := current(t, f.db, "lena@example.com"); !ok {
		t.Fatal("Prune deleted a recent code")
	}
}

// The limits live in Postgres and nothing of them in a Service: two api replicas (two
// services, each with its own pool on one database) asked at once give one budget per
// address and per IP, not one per replica.
func TestLimitsHoldAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.URL(t)
	m, inbox := smtpMailer(t)
	c := testenv.NewClock()
	var replicas []*magiccode.Service
	for range 2 {
		pool, err := pgstore.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(pool.Close)
		replicas = append(replicas, service(t, pool, m, c, func(o *magiccode.Options) {
			o.PerAddressLimit = magiccode.Limit{Max: 3, Window: 15 * time.Minute}
			o.PerIPLimit = magiccode.Limit{Max: 4, Window: 15 * time.Minute}
		}))
	}
	// sent asks for 12 codes at once, alternating between the replicas, and counts the sent.
	sent := func(email func(i int) string, ip func(i int) string) int {
		errs := make(chan error, 12)
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() { errs <- replicas[i%2].Request(ctx, email(i), ip(i), "en") })
		}
		wg.Wait()
		close(errs)
		n := 0
		for err := range errs {
			var rl *magiccode.RateLimitError
			switch {
			case err == nil:
				n++
			case !errors.As(err, &rl):
				t.Errorf("Request = %v", err)
			}
		}
		return n
	}
	if n := sent(func(int) string { return "nora@example.com" }, func(i int) string { return fmt.Sprintf("198.51.100.%d", i+1) }); n != 3 || inbox.Count("nora@example.com") != 3 {
		t.Errorf("one address from 12 IPs through 2 replicas: %d sent, %d e-mails; want 3", n, inbox.Count("nora@example.com"))
	}
	if n := sent(func(i int) string { return fmt.Sprintf("oscar%d@example.com", i) }, func(int) string { return "192.0.2.44" }); n != 4 {
		t.Errorf("one IP for 12 addresses through 2 replicas: %d sent, want 4", n)
	}
}
