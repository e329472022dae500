package billing_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/partnerstream/partnerstream/internal/billing"
	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const testSecret = "whsec_test5ecretOfTheBrandsEndpoint"

// env is a migrated Postgres with an advertiser whose EUR program pays 10 % for life on
// its customers, an approved affiliate with a link, and the program's Stripe endpoint.
type env struct {
	db       *pgxpool.Pool
	conv     *conversions.Service
	svc      *billing.Service
	keys     clickid.Keys
	adv      string
	program  string
	link     string
	token    string
	sequence int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	_, db := pgtest.Migrated(t)
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, keys: keys}
	e.conv = conversions.New(db, conversions.Options{ClickIDs: keys})
	e.svc = billing.New(db, e.conv, billing.Options{Log: quiet})
	store := identity.NewStore(db)
	company := func(kind string) string {
		co, _, err := store.CreateCompany(ctx, identity.NewCompany{Kind: kind, Name: kind, OwnerEmail: ids.New("usr") + "@example.test"})
		if err != nil {
			t.Fatal(err)
		}
		return co.ID
	}
	e.adv = company(identity.Advertiser)
	aff := company(identity.Affiliate)
	e.program = ids.New(ids.Program)
	ptn, link := ids.New(ids.Partnership), ids.New(ids.Link)
	e.exec(t, `INSERT INTO programs (id, advertiser_id, name, landing_url, currency, commission_type, commission_value,
		attribution_window_days, hold_days, recurring_lifetime) VALUES ($1, $2, 'p', 'https://shop.example/', 'EUR', 'percent', 1000, 30, 0, true)`,
		e.program, e.adv)
	e.exec(t, `INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status) VALUES ($1, $2, $3, $4, 'approved')`,
		ptn, e.program, aff, e.adv)
	e.exec(t, `INSERT INTO tracking_links (id, code, partnership_id, program_id, affiliate_id, advertiser_id)
		VALUES ($1, $2, $3, $4, $5, $6)`, link, fmt.Sprintf("%016x", time.Now().UnixNano()), ptn, e.program, aff, e.adv)
	e.link = link
	if e.token, err = e.svc.ConnectStripe(ctx, e.adv, e.program, testSecret); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func (e *env) click(t *testing.T) string {
	t.Helper()
	id, err := e.keys.Mint(e.link, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// event fills a fixture of Stripe's documented payloads; fields not given take defaults.
func (e *env) event(t *testing.T, fixture string, fields map[string]string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + fixture + ".json")
	if err != nil {
		t.Fatal(err)
	}
	e.sequence++
	values := map[string]string{
		"EVENT_ID": fmt.Sprintf("evt_%d_%s", e.sequence, strings.TrimPrefix(ids.New("evt"), "evt_")),
		"CREATED":  strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10),
		"AMOUNT":   "2000", "AMOUNT_REFUNDED": "2000", "REFUNDED": "true", "CURRENCY": "eur",
		"CLIENT_REFERENCE_ID": "null", "CUSTOMER": "null", "INVOICE": "null", "PAYMENT_INTENT": "null",
		"SUBSCRIPTION": "null", "METADATA": "{}", "SUBSCRIPTION_METADATA": "{}", "MODE": "payment",
		"PAYMENT_STATUS": "paid", "TYPE": "checkout.session.completed", "BILLING_REASON": "subscription_cycle",
	}
	for k, v := range fields {
		values[k] = v
	}
	s := string(raw)
	for k, v := range values {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	if strings.Contains(s, "{{") {
		t.Fatalf("fixture %s has a field left unfilled", fixture)
	}
	return []byte(s)
}

// send signs payload as Stripe does, with secret, and hands it to the endpoint.
func (e *env) send(t *testing.T, payload []byte, secret string) (billing.Outcome, error) {
	t.Helper()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret})
	return e.svc.ReceiveStripe(context.Background(), e.token, payload, signed.Header)
}

func (e *env) mustSend(t *testing.T, payload []byte, want string) billing.Outcome {
	t.Helper()
	out, err := e.send(t, payload, testSecret)
	if err != nil {
		t.Fatalf("ReceiveStripe: %v", err)
	}
	if out.Outcome != want {
		t.Fatalf("outcome %q (%s), want %q", out.Outcome, out.Detail, want)
	}
	return out
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) status(t *testing.T, conversionID string) (status, typ string) {
	t.Helper()
	c, err := e.conv.Get(context.Background(), conversions.Viewer{CompanyID: e.adv}, conversionID)
	if err != nil {
		t.Fatal(err)
	}
	return c.Commission.Status, c.Type
}

func quote(s string) string { return strconv.Quote(s) }

// A subscription bought through Checkout with the click id in its metadata: the session and
// its first invoice are one conversion whichever comes first, each redelivery changes
// nothing, the next month's invoice is a renewal of the bound customer, and its refund
// takes the renewal's commission back.
func TestStripeSubscriptionRenewalsAndRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	clk := e.click(t)
	session := e.event(t, "checkout.session.completed", map[string]string{
		"MODE": "subscription", "CUSTOMER": quote("cus_NffrFeUfNV2Hib"), "INVOICE": quote("in_first"),
		"SUBSCRIPTION": quote("sub_1MowQVLkdIwHu7ixeRlqHVzs"), "METADATA": `{"partnerstream_click_id": ` + quote(clk) + `}`})
	first := e.mustSend(t, session, billing.OutcomeRegistered)
	if status, typ := e.status(t, first.ConversionID); status != conversions.Pending || typ != conversions.TypeSale {
		t.Fatalf("the checkout's conversion is %s %s, want a pending sale", status, typ)
	}
	c, err := e.conv.Get(ctx, conversions.Viewer{CompanyID: e.adv}, first.ConversionID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Amount != 2000 || c.Commission.Amount != 200 || c.ClickID != clk || c.CustomerID != "cus_NffrFeUfNV2Hib" || c.Source != conversions.SourceStripe {
		t.Fatalf("conversion %+v: want 20.00 EUR, 2.00 commission, the click, the customer, source stripe", c)
	}
	// Stripe redelivers the same event: nothing changes.
	e.mustSend(t, session, billing.OutcomeDuplicate)
	// The subscription's first invoice is the same payment.
	firstInvoice := e.event(t, "invoice.paid", map[string]string{"INVOICE_ID": "in_first", "CUSTOMER": "cus_NffrFeUfNV2Hib",
		"BILLING_REASON": "subscription_create"})
	if out := e.mustSend(t, firstInvoice, billing.OutcomeRepeat); out.ConversionID != first.ConversionID {
		t.Fatalf("the first invoice answered %s, want the checkout's %s", out.ConversionID, first.ConversionID)
	}
	// A month later: no click, no metadata; the customer is bound.
	renewal := e.event(t, "invoice.paid", map[string]string{"INVOICE_ID": "in_second", "CUSTOMER": "cus_NffrFeUfNV2Hib", "AMOUNT": "3000"})
	second := e.mustSend(t, renewal, billing.OutcomeRegistered)
	if status, typ := e.status(t, second.ConversionID); status != conversions.Pending || typ != conversions.TypeRenewal {
		t.Fatalf("the renewal is %s %s, want a pending renewal", status, typ)
	}
	e.mustSend(t, e.event(t, "invoice_payment.paid", map[string]string{"INVOICE_ID": "in_second", "PAYMENT_INTENT": "pi_second"}),
		billing.OutcomeLinked)
	if n := e.count(t, `SELECT count(*) FROM conversions WHERE program_id = $1`, e.program); n != 2 {
		t.Fatalf("%d conversions, want 2", n)
	}
	// The renewal is refunded: its charge names the payment intent.
	refund := e.event(t, "charge.refunded", map[string]string{"CHARGE_ID": "ch_second", "PAYMENT_INTENT": "pi_second", "AMOUNT": "3000", "AMOUNT_REFUNDED": "3000"})
	if out := e.mustSend(t, refund, billing.OutcomeReversed); out.ConversionID != second.ConversionID {
		t.Fatalf("the refund reversed %s, want the renewal %s", out.ConversionID, second.ConversionID)
	}
	if status, _ := e.status(t, second.ConversionID); status != conversions.Rejected {
		t.Fatalf("the refunded renewal's pending commission is %s, want rejected", status)
	}
	if status, _ := e.status(t, first.ConversionID); status != conversions.Pending {
		t.Fatalf("the first sale's commission is %s, want it untouched", status)
	}
	events := e.count(t, `SELECT count(*) FROM outbox WHERE aggregate_id = $1`, second.ConversionID)
	e.mustSend(t, refund, billing.OutcomeDuplicate)
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE aggregate_id = $1`, second.ConversionID); n != events {
		t.Fatalf("a redelivered refund wrote %d more events", n-events)
	}
}

// Stripe does not keep order: a refund or a dispute that arrives before its payment is kept,
// and the payment's conversion is taken back as soon as it is registered; a partial refund
// changes nothing; an approved commission is reversed by a dispute.
func TestStripeEventsOutOfOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	refund := e.event(t, "charge.refunded", map[string]string{"CHARGE_ID": "ch_early", "PAYMENT_INTENT": "pi_early"})
	e.mustSend(t, refund, billing.OutcomeWaiting)
	e.mustSend(t, refund, billing.OutcomeDuplicate)
	checkout := e.event(t, "checkout.session.completed", map[string]string{"PAYMENT_INTENT": quote("pi_early"),
		"CLIENT_REFERENCE_ID": quote(e.click(t))})
	out := e.mustSend(t, checkout, billing.OutcomeReversed)
	if status, _ := e.status(t, out.ConversionID); status != conversions.Rejected {
		t.Fatalf("a payment refunded before it arrived has a %s commission, want rejected", status)
	}
	if n := e.count(t, `SELECT count(*) FROM stripe_reversals WHERE program_id = $1`, e.program); n != 0 {
		t.Fatalf("%d reversals still waiting after their payment came", n)
	}

	// Another sale, approved, then partly refunded (nothing) and disputed (reversed).
	sale := e.mustSend(t, e.event(t, "checkout.session.completed", map[string]string{"PAYMENT_INTENT": quote("pi_disputed"),
		"METADATA": `{"partnerstream_click_id": ` + quote(e.click(t)) + `}`}), billing.OutcomeRegistered)
	if _, err := e.conv.ChangeStatus(ctx, e.adv, sale.ConversionID, conversions.Approved, ""); err != nil {
		t.Fatal(err)
	}
	e.mustSend(t, e.event(t, "charge.refunded", map[string]string{"CHARGE_ID": "ch_disputed", "PAYMENT_INTENT": "pi_disputed",
		"AMOUNT_REFUNDED": "500", "REFUNDED": "false"}), billing.OutcomeIgnored)
	if status, _ := e.status(t, sale.ConversionID); status != conversions.Approved {
		t.Fatalf("a partial refund moved the commission to %s", status)
	}
	dispute := e.event(t, "charge.dispute.created", map[string]string{"CHARGE_ID": "ch_disputed", "PAYMENT_INTENT": "pi_disputed"})
	e.mustSend(t, dispute, billing.OutcomeReversed)
	if status, _ := e.status(t, sale.ConversionID); status != conversions.Reversed {
		t.Fatalf("a disputed approved commission is %s, want reversed", status)
	}
	// The same dispute under another event id (a second notice) finds it already reversed.
	e.mustSend(t, e.event(t, "charge.dispute.created", map[string]string{"CHARGE_ID": "ch_disputed", "PAYMENT_INTENT": "pi_disputed"}),
		billing.OutcomeIgnored)

	// Neither a session that only saves a card nor one not paid yet is a sale.
	e.mustSend(t, e.event(t, "checkout.session.completed", map[string]string{"MODE": "setup", "AMOUNT": "null",
		"METADATA": `{"partnerstream_click_id": ` + quote(e.click(t)) + `}`}), billing.OutcomeIgnored)
	e.mustSend(t, e.event(t, "checkout.session.completed", map[string]string{"PAYMENT_STATUS": "unpaid", "PAYMENT_INTENT": quote("pi_later"),
		"METADATA": `{"partnerstream_click_id": ` + quote(e.click(t)) + `}`}), billing.OutcomeIgnored)
	// A sale nobody brought is acknowledged and recorded, not registered.
	e.mustSend(t, e.event(t, "checkout.session.completed", map[string]string{"PAYMENT_INTENT": quote("pi_organic")}), billing.OutcomeUnattributed)
	// So is a click id that is not one of the program's.
	e.mustSend(t, e.event(t, "checkout.session.completed", map[string]string{"PAYMENT_INTENT": quote("pi_forged"),
		"METADATA": `{"partnerstream_click_id": "clk_forged"}`}), billing.OutcomeUnattributed)
	if n := e.count(t, `SELECT count(*) FROM conversions WHERE program_id = $1`, e.program); n != 2 {
		t.Fatalf("%d conversions, want 2", n)
	}
}

// Only the brand's Stripe account can send events: a signature with another secret, a body
// changed after signing, no signature, an old signature or a wrong token change nothing.
func TestStripeRefusesWhatStripeDidNotSign(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	payload := e.event(t, "checkout.session.completed", map[string]string{"PAYMENT_INTENT": quote("pi_x"),
		"CLIENT_REFERENCE_ID": quote(e.click(t))})
	if _, err := e.send(t, payload, "whsec_anotherSecret"); !errors.Is(err, billing.ErrBadSignature) {
		t.Fatalf("another secret: %v, want ErrBadSignature", err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: testSecret})
	tampered := []byte(strings.Replace(string(payload), `"amount_total": 2000`, `"amount_total": 999999`, 1))
	old := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: testSecret, Timestamp: time.Now().Add(-time.Hour)})
	for name, header := range map[string]string{"tampered": signed.Header, "unsigned": "", "old": old.Header, "garbage": "t=x,v1=zz"} {
		body := payload
		if name == "tampered" {
			body = tampered
		}
		if _, err := e.svc.ReceiveStripe(ctx, e.token, body, header); !errors.Is(err, billing.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	wrong := e.token[:len(e.token)-1] + map[bool]string{true: "0", false: "1"}[strings.HasSuffix(e.token, "1")]
	for _, token := range []string{wrong, "", "stp_short", e.token + "0"} {
		if _, err := e.svc.ReceiveStripe(ctx, token, payload, signed.Header); !errors.Is(err, billing.ErrInvalidToken) {
			t.Errorf("token %q: %v, want ErrInvalidToken", token, err)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM stripe_events`) + e.count(t, `SELECT count(*) FROM conversions`); n != 0 {
		t.Fatalf("refused events left %d rows", n)
	}
	// Reconnecting replaces the token and the secret at once.
	old2 := e.token
	var err error
	if e.token, err = e.svc.ConnectStripe(ctx, e.adv, e.program, "whsec_rotated"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.ReceiveStripe(ctx, old2, payload, signed.Header); !errors.Is(err, billing.ErrInvalidToken) {
		t.Fatalf("the replaced token: %v, want ErrInvalidToken", err)
	}
	if _, err := e.send(t, payload, testSecret); !errors.Is(err, billing.ErrBadSignature) {
		t.Fatalf("the replaced secret: %v, want ErrBadSignature", err)
	}
	if _, err := e.send(t, payload, "whsec_rotated"); err != nil {
		t.Fatalf("the new secret: %v", err)
	}
	var inv *billing.InvalidError
	if _, err := e.svc.ConnectStripe(ctx, e.adv, e.program, "sk_live_notASigningSecret"); !errors.As(err, &inv) || inv.Field != "endpoint_secret" {
		t.Fatalf("a secret key as endpoint secret: %v", err)
	}
	if _, err := e.svc.ConnectStripe(ctx, ids.New("co"), e.program, testSecret); !errors.Is(err, billing.ErrNotFound) {
		t.Fatalf("another advertiser's program: %v, want ErrNotFound", err)
	}
}
