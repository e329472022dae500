package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/money"
)

// The metadata keys a brand sets on a Checkout Session (or a subscription, whose invoices
// carry it) to say who brought the customer. A session's client_reference_id may carry the
// click id too.
const (
	MetaClickID    = "partnerstream_click_id"
	MetaCouponCode = "partnerstream_coupon_code"
)

// The Stripe event types handled; any other is acknowledged and ignored.
const (
	EventCheckoutCompleted    = "checkout.session.completed"
	EventCheckoutAsyncPaid    = "checkout.session.async_payment_succeeded"
	EventInvoicePaid          = "invoice.paid"
	EventInvoicePaymentPaid   = "invoice_payment.paid"
	EventChargeRefunded       = "charge.refunded"
	EventChargeDisputeCreated = "charge.dispute.created"
)

// Outcomes of an event, recorded with it and returned to the caller.
const (
	OutcomeRegistered   = "registered"    // a new conversion
	OutcomeRepeat       = "repeat"        // the payment's conversion already existed
	OutcomeReversed     = "reversed"      // a commission was taken back
	OutcomeWaiting      = "waiting"       // a reversal whose payment has not arrived yet
	OutcomeLinked       = "linked"        // a payment's objects were tied to its conversion
	OutcomeIgnored      = "ignored"       // nothing to do (another type, nothing paid, a partial refund)
	OutcomeUnattributed = "unattributed"  // no click, code or bound customer says whose it is
	OutcomeNotReversed  = "not_reversed"  // the commission was paid, or is in a payout
	OutcomeDuplicate    = "duplicate"     // the event was handled before
	outcomeNotFound     = "no_conversion" // a reversal of a payment that made no conversion
)

// Outcome is what an event did.
type Outcome struct {
	EventID, Type, Outcome string
	// ConversionID is the conversion registered, found or reversed, if any.
	ConversionID string
	// Detail says why an event did nothing (safe to show: no secret, no personal data).
	Detail string
}

// ReceiveStripe verifies and handles one Stripe event sent to the endpoint of token: the
// signature must verify with the endpoint's secret (ErrBadSignature), and an event already
// handled changes nothing (OutcomeDuplicate). Events of one program are handled one at a
// time, so that a redelivery racing its first delivery, or a refund racing its payment,
// cannot both miss the other. An error other than ErrInvalidToken and ErrBadSignature means
// the event was not handled and may be sent again.
func (s *Service) ReceiveStripe(ctx context.Context, token string, payload []byte, signature string) (Outcome, error) {
	e, err := s.check(ctx, token)
	if err != nil {
		return Outcome{}, err
	}
	// The API version of the payload is the brand's choice (its endpoint's); only the fields
	// read below matter, and they are read from the raw object, so any version is taken.
	ev, err := webhook.ConstructEventWithOptions(payload, signature, e.secret,
		webhook.ConstructEventOptions{Tolerance: s.tolerance, IgnoreAPIVersionMismatch: true})
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	if ev.ID == "" || len(ev.ID) > 255 || ev.Data == nil {
		return Outcome{}, fmt.Errorf("%w: the event has no id or no data", ErrBadSignature)
	}
	out := Outcome{EventID: ev.ID, Type: string(ev.Type)}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('stripe:' || $1, 0))`, e.programID); err != nil {
			return fmt.Errorf("lock stripe events of %s: %w", e.programID, err)
		}
		var seen bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM stripe_events WHERE program_id = $1 AND event_id = $2)`,
			e.programID, ev.ID).Scan(&seen); err != nil {
			return fmt.Errorf("read stripe event %s: %w", ev.ID, err)
		}
		if seen {
			out.Outcome = OutcomeDuplicate
			return nil
		}
		if err := s.handle(ctx, tx, e, string(ev.Type), time.Unix(ev.Created, 0).UTC(), ev.ID, ev.Data.Raw, &out); err != nil {
			return err
		}
		now := s.now()
		if _, err := tx.Exec(ctx, `INSERT INTO stripe_events (program_id, event_id, type, outcome, received_at)
			VALUES ($1, $2, $3, $4, $5)`, e.programID, ev.ID, cutTo(string(ev.Type), 100), out.Outcome, now); err != nil {
			return fmt.Errorf("record stripe event %s: %w", ev.ID, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE stripe_integrations SET last_event_at = $2 WHERE program_id = $1`, e.programID, now); err != nil {
			return fmt.Errorf("touch stripe integration of %s: %w", e.programID, err)
		}
		return nil
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("stripe event %s of program %s: %w", ev.ID, e.programID, err)
	}
	s.log.Info("stripe event", "program_id", e.programID, "event_id", out.EventID, "type", out.Type,
		"outcome", out.Outcome, "conversion_id", out.ConversionID, "detail", out.Detail)
	return out, nil
}

// stripeObject holds the fields read from the objects of the events handled, in the shapes
// of the API versions before and after 2025-03-31 (invoices' payment fields moved then).
type stripeObject struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	AmountTotal       *int64            `json:"amount_total"` // checkout session
	AmountPaid        *int64            `json:"amount_paid"`  // invoice
	Currency          string            `json:"currency"`
	Customer          json.RawMessage   `json:"customer"` // an id, or an expanded object
	ClientReferenceID string            `json:"client_reference_id"`
	Metadata          map[string]string `json:"metadata"`
	PaymentStatus     string            `json:"payment_status"`
	Mode              string            `json:"mode"` // checkout session: payment, subscription or setup
	PaymentIntent     json.RawMessage   `json:"payment_intent"`
	Invoice           json.RawMessage   `json:"invoice"`
	Charge            json.RawMessage   `json:"charge"`
	BillingReason     string            `json:"billing_reason"`
	Refunded          bool              `json:"refunded"`
	// SubscriptionDetails is an invoice's copy of its subscription's metadata, before
	// 2025-03-31; Parent.SubscriptionDetails since.
	SubscriptionDetails *struct {
		Metadata map[string]string `json:"metadata"`
	} `json:"subscription_details"`
	Parent *struct {
		SubscriptionDetails *struct {
			Metadata map[string]string `json:"metadata"`
		} `json:"subscription_details"`
	} `json:"parent"`
	// Payment is an invoice payment's (invoice_payment.paid).
	Payment *struct {
		PaymentIntent json.RawMessage `json:"payment_intent"`
		Charge        json.RawMessage `json:"charge"`
	} `json:"payment"`
	Payments *struct {
		Data []struct {
			Payment struct {
				PaymentIntent json.RawMessage `json:"payment_intent"`
				Charge        json.RawMessage `json:"charge"`
			} `json:"payment"`
		} `json:"data"`
	} `json:"payments"`
}

// ref reads an id field that may be a string, an expanded object or null.
func ref(raw json.RawMessage) string {
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.ID
	}
	return ""
}

func (s *Service) handle(ctx context.Context, tx pgx.Tx, e endpoint, typ string, at time.Time, eventID string, raw json.RawMessage, out *Outcome) error {
	var o stripeObject
	if err := json.Unmarshal(raw, &o); err != nil {
		out.Outcome, out.Detail = OutcomeIgnored, "the event's object cannot be read"
		return nil
	}
	switch typ {
	case EventCheckoutCompleted, EventCheckoutAsyncPaid:
		return s.checkout(ctx, tx, e, o, at, eventID, out)
	case EventInvoicePaid:
		return s.invoice(ctx, tx, e, o, at, eventID, out)
	case EventInvoicePaymentPaid:
		if o.Payment == nil {
			out.Outcome = OutcomeIgnored
			return nil
		}
		// Since 2025-03-31 an invoice names its payment only here: tie the payment's objects to
		// the invoice's conversion, so that a refund finds it.
		return s.link(ctx, tx, e, ref(o.Invoice), []string{ref(o.Payment.PaymentIntent), ref(o.Payment.Charge)}, out)
	case EventChargeRefunded:
		if !o.Refunded {
			out.Outcome, out.Detail = OutcomeIgnored, "a partial refund leaves the commission as it is"
			return nil
		}
		return s.reverse(ctx, tx, e, "refunded in Stripe ("+o.ID+")", []string{o.ID, ref(o.PaymentIntent), ref(o.Invoice)}, out)
	case EventChargeDisputeCreated:
		return s.reverse(ctx, tx, e, "disputed in Stripe ("+o.ID+")", []string{ref(o.Charge), ref(o.PaymentIntent)}, out)
	}
	out.Outcome = OutcomeIgnored
	return nil
}

// checkout registers a paid Checkout Session. A subscription's session and its first
// invoice are one payment: both register under the invoice's id, so whichever comes first
// makes the conversion and the other is a repeat.
func (s *Service) checkout(ctx context.Context, tx pgx.Tx, e endpoint, o stripeObject, at time.Time, eventID string, out *Outcome) error {
	switch {
	case o.Mode == "setup":
		out.Outcome, out.Detail = OutcomeIgnored, "a setup session sells nothing"
		return nil
	case o.PaymentStatus == "unpaid":
		out.Outcome, out.Detail = OutcomeIgnored, "not paid yet: checkout.session.async_payment_succeeded will say when it is"
		return nil
	}
	in := conversions.NewConversion{ClickID: o.Metadata[MetaClickID], CouponCode: o.Metadata[MetaCouponCode], CustomerID: ref(o.Customer)}
	if in.ClickID == "" && strings.HasPrefix(o.ClientReferenceID, "clk_") {
		in.ClickID = o.ClientReferenceID
	}
	invoice, intent := ref(o.Invoice), ref(o.PaymentIntent)
	in.ExternalID = firstOf(invoice, intent, o.ID)
	amount := int64(0)
	if o.AmountTotal != nil {
		amount = *o.AmountTotal
	}
	in.Type = conversions.TypeSale
	if amount == 0 {
		// A free trial's checkout pays nothing, but it is where the customer came from: a
		// signup binds the customer, and its renewals earn as the program's rule says.
		in.Type = conversions.TypeSignup
	}
	return s.register(ctx, tx, e, in, amount, o.Currency, at, eventID, []string{o.ID, invoice, intent}, out)
}

// invoice registers a paid invoice: a renewal when the subscription cycled, else a sale.
func (s *Service) invoice(ctx context.Context, tx pgx.Tx, e endpoint, o stripeObject, at time.Time, eventID string, out *Outcome) error {
	if o.AmountPaid == nil || *o.AmountPaid == 0 {
		out.Outcome, out.Detail = OutcomeIgnored, "nothing was paid"
		return nil
	}
	meta := o.Metadata
	switch {
	case meta[MetaClickID] != "" || meta[MetaCouponCode] != "":
	case o.Parent != nil && o.Parent.SubscriptionDetails != nil:
		meta = o.Parent.SubscriptionDetails.Metadata
	case o.SubscriptionDetails != nil:
		meta = o.SubscriptionDetails.Metadata
	}
	in := conversions.NewConversion{ClickID: meta[MetaClickID], CouponCode: meta[MetaCouponCode], CustomerID: ref(o.Customer),
		ExternalID: o.ID, Type: conversions.TypeSale}
	if o.BillingReason == "subscription_cycle" {
		in.Type = conversions.TypeRenewal
	}
	refs := []string{o.ID, ref(o.PaymentIntent), ref(o.Charge)}
	if o.Payments != nil {
		for _, p := range o.Payments.Data {
			refs = append(refs, ref(p.Payment.PaymentIntent), ref(p.Payment.Charge))
		}
	}
	return s.register(ctx, tx, e, in, *o.AmountPaid, o.Currency, at, eventID, refs, out)
}

// register registers a payment's conversion, ties the payment's objects to it, and applies
// a reversal that came before it.
func (s *Service) register(ctx context.Context, tx pgx.Tx, e endpoint, in conversions.NewConversion, amount int64, currency string,
	at time.Time, eventID string, refs []string, out *Outcome) error {
	currency = strings.ToUpper(currency)
	if !money.ValidCurrency(currency) {
		out.Outcome, out.Detail = OutcomeIgnored, "unknown currency "+cutTo(currency, 10)
		return nil
	}
	if in.ClickID == "" && in.CouponCode == "" && in.CustomerID == "" {
		out.Outcome, out.Detail = OutcomeUnattributed, "no "+MetaClickID+", "+MetaCouponCode+" or customer"
		return nil
	}
	in.Amount, in.Currency, in.OccurredAt, in.ProgramID = money.Format(amount, currency), currency, at, e.programID
	in.Source = conversions.SourceStripe
	in.Metadata, _ = json.Marshal(map[string]string{"stripe_event": eventID})
	c, created, err := s.conv.Register(ctx, e.advertiserID, in)
	if err != nil {
		if detail := refusal(err); detail != "" {
			out.Outcome, out.Detail = OutcomeUnattributed, detail
			return nil
		}
		return fmt.Errorf("register conversion: %w", err)
	}
	out.Outcome, out.ConversionID = OutcomeRepeat, c.ID
	if created {
		out.Outcome = OutcomeRegistered
	}
	return s.tie(ctx, tx, e, c.ExternalID, refs, out)
}

// tie records that refs are objects of the payment that made the conversion of externalID,
// and applies a reversal kept for any of them (with every object that reversal named).
func (s *Service) tie(ctx context.Context, tx pgx.Tx, e endpoint, externalID string, refs []string, out *Outcome) error {
	var reason string
	err := tx.QueryRow(ctx, `WITH waiting AS (
			DELETE FROM stripe_reversals WHERE program_id = $1 AND reason IN
				(SELECT reason FROM stripe_reversals WHERE program_id = $1 AND ref = ANY($2))
			RETURNING ref, reason),
		linked AS (INSERT INTO stripe_payments (program_id, ref, external_id)
			SELECT $1, r, $3 FROM (SELECT unnest($2::text[]) UNION SELECT ref FROM waiting) AS refs (r)
			WHERE r <> '' ON CONFLICT DO NOTHING)
		SELECT reason FROM waiting LIMIT 1`, e.programID, refs, externalID).Scan(&reason)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("tie stripe payment of %s: %w", externalID, err)
	}
	return s.apply(ctx, e, externalID, reason, out)
}

// link ties more of a payment's objects to the conversion of its invoice, and applies a
// reversal that came before them.
func (s *Service) link(ctx context.Context, tx pgx.Tx, e endpoint, invoice string, refs []string, out *Outcome) error {
	var externalID string
	err := tx.QueryRow(ctx, `SELECT external_id FROM stripe_payments WHERE program_id = $1 AND ref = $2`, e.programID, invoice).Scan(&externalID)
	if errors.Is(err, pgx.ErrNoRows) {
		// Its invoice made no conversion (yet): invoice.paid ties the payment when it does, if
		// its payload names it; or it was not the affiliates' at all.
		out.Outcome, out.Detail = OutcomeIgnored, "the invoice made no conversion"
		return nil
	}
	if err != nil {
		return fmt.Errorf("read stripe payment %s: %w", invoice, err)
	}
	out.Outcome = OutcomeLinked
	return s.tie(ctx, tx, e, externalID, refs, out)
}

// reverse takes back the commission of the payment refs name, or keeps the reversal until
// the payment arrives.
func (s *Service) reverse(ctx context.Context, tx pgx.Tx, e endpoint, reason string, refs []string, out *Outcome) error {
	var externalID string
	err := tx.QueryRow(ctx, `SELECT external_id FROM stripe_payments WHERE program_id = $1 AND ref = ANY($2) LIMIT 1`,
		e.programID, refs).Scan(&externalID)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := tx.Exec(ctx, `INSERT INTO stripe_reversals (program_id, ref, reason, received_at)
			SELECT $1, r, $3, $4 FROM unnest($2::text[]) r WHERE r <> '' ON CONFLICT DO NOTHING`,
			e.programID, refs, reason, s.now()); err != nil {
			return fmt.Errorf("keep stripe reversal: %w", err)
		}
		out.Outcome, out.Detail = OutcomeWaiting, "no conversion of this payment yet: it is reversed when one is registered"
		return nil
	}
	if err != nil {
		return fmt.Errorf("read stripe payment: %w", err)
	}
	return s.apply(ctx, e, externalID, reason, out)
}

// apply reverses the commission of a conversion.
func (s *Service) apply(ctx context.Context, e endpoint, externalID, reason string, out *Outcome) error {
	c, changed, err := s.conv.Reverse(ctx, e.advertiserID, e.programID, externalID, reason)
	switch {
	case errors.Is(err, conversions.ErrNotFound):
		out.Outcome = outcomeNotFound
		return nil
	case errors.Is(err, conversions.ErrAlreadyPaid), errors.Is(err, conversions.ErrInPayout):
		out.Outcome, out.Detail = OutcomeNotReversed, err.Error()
		return nil
	case err != nil:
		return err
	}
	out.ConversionID = c.ID
	if changed {
		out.Outcome = OutcomeReversed
	} else if out.Outcome == "" {
		out.Outcome, out.Detail = OutcomeIgnored, "the commission was already "+c.Commission.Status
	}
	return nil
}

// refusal says why a conversion was refused for good (no retry would change it), or "" for
// an error worth a redelivery (a store that did not answer).
func refusal(err error) string {
	var inv *conversions.InvalidError
	switch {
	case errors.As(err, &inv):
		return inv.Error()
	case errors.Is(err, conversions.ErrUnknownClick), errors.Is(err, conversions.ErrUnknownCoupon),
		errors.Is(err, conversions.ErrUnknownCustomer), errors.Is(err, conversions.ErrCustomerExpired),
		errors.Is(err, conversions.ErrClickExpired), errors.Is(err, conversions.ErrNoExchangeRate):
		return err.Error()
	}
	return ""
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// cutTo shortens an ASCII value Stripe sent to n bytes.
func cutTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
