package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/webhooks"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// DeliveryHistory is what the delivery routes need from internal/delivery (*delivery.History).
type DeliveryHistory interface {
	Webhook(ctx context.Context, companyID, webhookID string, f delivery.Filter, p page.Request) (page.List[delivery.Delivery], error)
	Postbacks(ctx context.Context, companyID string, f delivery.Filter, p page.Request) (page.List[delivery.Delivery], error)
	Replay(ctx context.Context, companyID, deliveryID string) (delivery.Delivery, error)
	RetryFailed(ctx context.Context, companyID string, f delivery.RetryFilter) (int64, error)
	Health(ctx context.Context, companyID, kind, targetID string) (delivery.Health, error)
	EnablePostback(ctx context.Context, companyID string) (delivery.Reenabled, error)
}

// deliveryList is a page of a target's deliveries with the target's health.
type deliveryList struct {
	page.List[delivery.Delivery]
	Endpoint delivery.Health `json:"endpoint"`
}

// listWithHealth answers a page of deliveries of the target with its health.
func (d deliveryHandlers) listWithHealth(c *fiber.Ctx, l page.List[delivery.Delivery], kind, targetID string) error {
	h, err := d.history.Health(c.UserContext(), Caller(c).CompanyID, kind, targetID)
	if err != nil {
		return err
	}
	l.Data = nonNil(l.Data)
	return c.JSON(deliveryList{List: l, Endpoint: h})
}

// DeliveryWebhooks is what they need from internal/webhooks (*webhooks.Service): that a
// webhook is the caller's, and the keys a delivery to it is signed with.
type DeliveryWebhooks interface {
	Get(ctx context.Context, companyID, id string) (webhooks.Webhook, error)
	SigningTarget(ctx context.Context, companyID, id string, now time.Time) (signing.Target, error)
}

// DeliveriesOptions configure the delivery routes.
type DeliveriesOptions struct {
	// Client sends the test endpoint's request with "send": true, through a delivery.Sender
	// (one attempt, as the workers make it). It must be the delivery workers' SSRF-guarded
	// client (the resolved address checked at connect time): the URL is the integrator's.
	// Nil answers such a request 503 sending_unavailable.
	Client *http.Client
	// Postbacks signs the test endpoint's postback samples with the caller's postback keys
	// (*postbacks.Service); nil answers "postback": true 503.
	Postbacks delivery.PostbackKeys
	// Now is the clock of the test endpoint's timestamps; time.Now when nil.
	Now func() time.Time
}

// MountDeliveries adds the delivery history and recovery routes of the dashboard (webhooks
// and postbacks of the caller's company) and the public API's test endpoint. A nil hooks (an
// api without a Kubernetes API) keeps the routes; those that need a webhook answer 503.
func (s *Server) MountDeliveries(history DeliveryHistory, hooks DeliveryWebhooks, o DeliveriesOptions) {
	if hooks == nil {
		hooks = noDeliveryWebhooks{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	d := deliveryHandlers{history: history, hooks: hooks, postbacks: o.Postbacks, now: o.Now}
	if o.Client != nil {
		d.sender = delivery.NewSender(o.Client)
	}
	admin := requireAdminTo("replay deliveries")
	// Literal paths before /api/webhooks/:id... (Fiber tries routes in registration order).
	s.app.Post("/api/webhooks/retry-failed", admin, d.retryFailed)
	s.app.Get("/api/webhooks/:id/deliveries", d.webhookHistory)
	s.app.Post("/api/webhooks/:deliveryId/replay", admin, d.replay)
	s.app.Get("/api/postbacks/deliveries", d.postbackHistory)
	s.app.Post("/api/postbacks/enable", requireAdminTo("re-enable the postback URL"), d.enablePostback)
	s.app.Post("/api/webhooks/test", requireAdminTo("send test deliveries"), d.test)
	s.app.Post("/api/v1/webhooks/test", d.test)
}

type deliveryHandlers struct {
	history   DeliveryHistory
	hooks     DeliveryWebhooks
	postbacks delivery.PostbackKeys // nil: no postback samples
	// sender makes the test endpoint's attempt; nil without a guarded client.
	sender *delivery.Sender
	now    func() time.Time
}

func (d deliveryHandlers) webhookHistory(c *fiber.Ctx) error {
	f, p, err := deliveryQuery(c)
	if err != nil {
		return err
	}
	company, id := Caller(c).CompanyID, c.Params("id")
	if _, err := d.hooks.Get(c.UserContext(), company, id); err != nil {
		return webhookProblem(c, err)
	}
	l, err := d.history.Webhook(c.UserContext(), company, id, f, p)
	if err != nil {
		return err
	}
	return d.listWithHealth(c, l, delivery.KindWebhook, id)
}

func (d deliveryHandlers) postbackHistory(c *fiber.Ctx) error {
	f, p, err := deliveryQuery(c)
	if err != nil {
		return err
	}
	company := Caller(c).CompanyID
	l, err := d.history.Postbacks(c.UserContext(), company, f, p)
	if err != nil {
		return err
	}
	return d.listWithHealth(c, l, delivery.KindPostback, company)
}

func (d deliveryHandlers) replay(c *fiber.Ctx) error {
	if err := decodeOptionalJSON(c, &struct{}{}); err != nil {
		return err
	}
	id := c.Params("deliveryId")
	if !ids.Valid(ids.Delivery, id) {
		return errNoDelivery
	}
	out, err := d.history.Replay(c.UserContext(), Caller(c).CompanyID, id)
	var se *delivery.StateError
	switch {
	case errors.Is(err, delivery.ErrNotFound):
		return errNoDelivery
	case errors.As(err, &se):
		return NewProblem(fiber.StatusConflict, "delivery_not_replayable", se.Error()).
			With("delivery_status", se.Status).With("replayable_statuses", []string{delivery.StatusFailed})
	case err != nil:
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(out)
}

var errNoDelivery = NewProblem(fiber.StatusNotFound, "not_found", "no such delivery")

func (d deliveryHandlers) retryFailed(c *fiber.Ctx) error {
	var in struct {
		WebhookID string `json:"webhook_id"`
		Postbacks bool   `json:"postbacks"`
		From      string `json:"from"`
		To        string `json:"to"`
	}
	if err := decodeOptionalJSON(c, &in); err != nil {
		return err
	}
	f := delivery.RetryFilter{WebhookID: in.WebhookID, Postbacks: in.Postbacks}
	errs := timeRange(&f.From, &f.To, in.From, in.To)
	if f.Postbacks && f.WebhookID != "" {
		errs = append(errs, FieldError{Field: "postbacks", Message: "cannot be combined with webhook_id"})
	}
	if errs != nil {
		return Invalid(errs...)
	}
	company := Caller(c).CompanyID
	if f.WebhookID != "" {
		if _, err := d.hooks.Get(c.UserContext(), company, f.WebhookID); err != nil {
			return webhookProblem(c, err)
		}
	}
	n, err := d.history.RetryFailed(c.UserContext(), company, f)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"queued": n})
}

// enablePostback re-enables the caller's postback URL after deliver disabled it for failing,
// and says what failed meanwhile (a bulk retry with postbacks from failing_since replays it).
func (d deliveryHandlers) enablePostback(c *fiber.Ctx) error {
	out, err := d.history.EnablePostback(c.UserContext(), Caller(c).CompanyID)
	if err != nil {
		return err
	}
	return c.JSON(out)
}

// deliveryQuery reads the history filters and the page.
func deliveryQuery(c *fiber.Ctx) (delivery.Filter, page.Request, error) {
	p, err := PageRequest(c)
	if err != nil {
		return delivery.Filter{}, p, err
	}
	f := delivery.Filter{Status: c.Query("status"), EventType: c.Query("event_type")}
	var errs []FieldError
	if f.Status != "" && !slices.Contains(delivery.Statuses, f.Status) {
		errs = append(errs, FieldError{Field: "status", Message: "must be one of " + strings.Join(delivery.Statuses, ", ")})
	}
	if f.EventType != "" && !slices.Contains(events.Types, f.EventType) {
		errs = append(errs, FieldError{Field: "event_type", Message: "must be one of " + strings.Join(events.Types, ", ")})
	}
	errs = append(errs, timeRange(&f.From, &f.To, c.Query("from"), c.Query("to"))...)
	if errs != nil {
		return f, p, Invalid(errs...)
	}
	return f, p, nil
}

// webhookTestInput asks for a sample delivery.
type webhookTestInput struct {
	// EventType defaults to conversion.created.
	EventType string `json:"event_type"`
	// WebhookID signs with that webhook's live secrets; otherwise Secret, or a fresh
	// example secret that the answer shows.
	WebhookID string `json:"webhook_id"`
	Secret    string `json:"secret"`
	// Postback signs with the company's postback secrets instead, as a postback of
	// commission.status_changed (the only event postbacks carry).
	Postback bool `json:"postback"`
	// Send also POSTs it once to the webhook's URL, or to the postback URL with its
	// placeholders filled (needs WebhookID or Postback).
	Send bool `json:"send"`
}

// webhookTest is a sample delivery: the exact body and the headers a delivery of it carries.
type webhookTest struct {
	// Body is the exact bytes a verifier checks; Payload is the same event as a JSON object,
	// for a person or a generated client.
	Body    string            `json:"body"`
	Payload json.RawMessage   `json:"payload"`
	Headers map[string]string `json:"headers"`
	// Secret is the example secret it was signed with, when the request named none.
	Secret string          `json:"secret,omitempty"`
	Sent   *testSendResult `json:"sent,omitempty"`
}

// testSendResult is the receiver's answer to a sent sample.
type testSendResult struct {
	URL string `json:"url"`
	// Success is true for a 2xx, like a delivery attempt.
	Success bool `json:"success"`
	// StatusCode is nil when no response came (timeout, refused connection, SSRF refusal).
	StatusCode      *int   `json:"status_code"`
	DurationMS      int64  `json:"duration_ms"`
	Error           string `json:"error,omitempty"`
	ResponseExcerpt string `json:"response_excerpt,omitempty"`
}

func (d deliveryHandlers) test(c *fiber.Ctx) error {
	var in webhookTestInput
	if err := decodeOptionalJSON(c, &in); err != nil {
		return err
	}
	switch {
	case in.EventType == "" && in.Postback:
		in.EventType = events.CommissionStatusChanged
	case in.EventType == "":
		in.EventType = events.ConversionCreated
	}
	var errs []FieldError
	if !slices.Contains(events.SampleTypes, in.EventType) {
		errs = append(errs, FieldError{Field: "event_type", Message: "must be one of " + strings.Join(events.SampleTypes, ", ")})
	}
	if in.WebhookID != "" && in.Secret != "" {
		errs = append(errs, FieldError{Field: "secret", Message: "give webhook_id or secret, not both: a webhook signs with its own secrets"})
	}
	var keys []signing.HMACKey
	if in.Secret != "" {
		k, err := signing.Key(in.Secret)
		if err != nil {
			errs = append(errs, FieldError{Field: "secret", Message: "must be a signing secret: whsec_ and the base64 of 24 to 64 bytes"})
		}
		keys = []signing.HMACKey{{Key: k}}
	}
	if in.Postback && (in.WebhookID != "" || in.Secret != "") {
		errs = append(errs, FieldError{Field: "postback", Message: "give postback, webhook_id or secret, one of them: each signs with its own secrets"})
	}
	if in.Postback && in.EventType != events.CommissionStatusChanged {
		errs = append(errs, FieldError{Field: "event_type", Message: "postbacks carry " + events.CommissionStatusChanged + " only"})
	}
	if in.Send && in.WebhookID == "" && !in.Postback {
		errs = append(errs, FieldError{Field: "send", Message: "needs webhook_id or postback: a sample is only sent to one of your webhooks or your postback URL"})
	}
	if errs != nil {
		return Invalid(errs...)
	}

	now := d.now()
	caller := Caller(c)
	ctx := c.UserContext()
	out := webhookTest{}
	var target signing.Target
	kind := delivery.KindWebhook
	switch {
	case in.Postback:
		if d.postbacks == nil {
			return NewProblem(fiber.StatusServiceUnavailable, "postbacks_unavailable", "this api cannot sign postback samples")
		}
		var err error
		target.URL, keys, err = d.postbacks.SigningKeys(ctx, caller.CompanyID, now)
		if errors.Is(err, postbacks.ErrNotConfigured) {
			return NewProblem(fiber.StatusConflict, "postback_not_configured", "set a postback URL first")
		}
		if err != nil {
			return err
		}
		kind = delivery.KindPostback
	case in.WebhookID != "":
		var err error
		if target, err = d.hooks.SigningTarget(ctx, caller.CompanyID, in.WebhookID, now); err != nil {
			if errors.Is(err, webhooks.ErrNotReady) {
				return NewProblem(fiber.StatusConflict, "webhook_not_ready", "the webhook has no signing secret yet: the controller publishes it shortly, try again")
			}
			return webhookProblem(c, err)
		}
		keys = target.Secrets
	case in.Secret == "":
		out.Secret = signing.NewSecret()
		k, _ := signing.Key(out.Secret) // NewSecret makes valid ones
		keys = []signing.HMACKey{{Key: k}}
	}
	if in.Send && d.sender == nil {
		return NewProblem(fiber.StatusServiceUnavailable, "sending_unavailable", "this api cannot send test deliveries (no guarded HTTP client is configured); call again without send")
	}

	sample, _ := events.Sample(in.EventType, caller.CompanyID, caller.CompanyKind == identity.Affiliate, now) // a type checked above
	body, err := events.WebhookBody(sample)
	if err != nil {
		return err
	}
	msg := delivery.Message{ID: ids.New(ids.Delivery), Kind: kind, Body: body, At: now, Keys: keys}
	out.Body, out.Payload, out.Headers = string(body), body, msg.Headers()
	if in.Send {
		url := target.URL
		if in.Postback {
			url = postbacks.ExpandURL(url, body)
		}
		out.Sent = d.send(ctx, url, msg)
	}
	if out.Secret != "" {
		c.Set(fiber.HeaderCacheControl, "no-store")
	}
	return c.JSON(out)
}

// send makes one delivery attempt of the sample and reports the answer.
func (d deliveryHandlers) send(ctx context.Context, url string, msg delivery.Message) *testSendResult {
	r, err := d.sender.Send(ctx, url, msg)
	res := &testSendResult{URL: url, DurationMS: r.Duration.Milliseconds()}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.StatusCode, res.Success = &r.StatusCode, r.Succeeded()
	res.ResponseExcerpt = r.Excerpt
	return res
}

// noDeliveryWebhooks stands in when the api has no Kubernetes API.
type noDeliveryWebhooks struct{ noWebhooks }

func (noDeliveryWebhooks) SigningTarget(context.Context, string, string, time.Time) (signing.Target, error) {
	return signing.Target{}, errNoKubernetes
}
