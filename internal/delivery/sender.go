package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/partnerstream/partnerstream/internal/egress"
	"github.com/partnerstream/partnerstream/internal/version"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// Limits of one attempt (docs/architecture.md, "Delivery: retries, limits and the SSRF guard").
const (
	attemptTimeout = 15 * time.Second
	connectTimeout = 5 * time.Second
	// maxExcerpt caps the response excerpt and the error kept per attempt, in characters.
	maxExcerpt = 1024
	// drainLimit is how much of a longer response is read to keep its connection reusable.
	drainLimit = 64 << 10
)

// userAgent names the sender of every attempt.
var userAgent = "PartnerStream-Webhooks/" + version.Version

// NewHTTPClient returns the client the workers send with: the SSRF guard checks every
// resolved address at connect time (allow lists the ranges permitted anyway), connecting
// takes at most 5 s, no proxy is used and redirects are not followed (a 3xx is the answer).
// The API's test endpoint sends with it too, through a Sender. roots verifies the receivers'
// certificates (nil: the system's CAs).
func NewHTTPClient(allow []netip.Prefix, roots *x509.CertPool) *http.Client {
	dialer := egress.Dialer(allow, connectTimeout)
	transport := &http.Transport{
		// No proxy: the guard must see the receiver's address, not a proxy's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   connectTimeout,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: transport, CheckRedirect: noRedirect}
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Message is what one attempt sends: a body signed as a delivery.
type Message struct {
	// ID is the webhook-id: the delivery's id, the same in every attempt of it.
	ID string
	// Kind is KindWebhook or KindPostback: it names the legacy signature header.
	Kind string
	Body []byte
	// At is the time of the attempt, signed as the webhook-timestamp.
	At time.Time
	// Keys sign it, one signature each: the target's live keys (signing.Live).
	Keys []signing.HMACKey
}

// Headers returns the headers an attempt of m carries, by their documented names, but the
// User-Agent: the content type and the signature headers.
func (m Message) Headers() map[string]string {
	legacy := signing.WebhookSignatureHeader
	if m.Kind == KindPostback {
		legacy = signing.PostbackSignatureHeader
	}
	h := signing.Headers(legacy, m.ID, m.At, m.Body, m.Keys)
	h["content-type"] = "application/json"
	return h
}

// Response is what came of one attempt.
type Response struct {
	// StatusCode is 0 when no response came.
	StatusCode int
	Status     string
	Header     http.Header
	// Excerpt is the start of the response body: valid UTF-8, at most 1024 characters.
	Excerpt string
	// Duration is how long the attempt took, also when it failed.
	Duration time.Duration
}

// Succeeded reports whether the attempt succeeded: only a 2xx does.
func (r Response) Succeeded() bool { return r.StatusCode >= 200 && r.StatusCode < 300 }

// ErrInvalidURL is a target URL no request can be made to.
var ErrInvalidURL = errors.New("invalid target URL")

// Sender makes single attempts, for the delivery workers and the API's test endpoint alike:
// it POSTs a Message with its headers and the User-Agent, within the attempt timeout (15 s),
// never follows a redirect and keeps an excerpt of the answer.
type Sender struct {
	client *http.Client
	// timeout bounds an attempt: attemptTimeout (tests shorten it).
	timeout time.Duration
}

// NewSender sends with client, which must be NewHTTPClient's or as guarded: the URLs are the
// integrators'. Redirects are not followed, whatever client says.
func NewSender(client *http.Client) *Sender {
	c := *client
	c.CheckRedirect = noRedirect
	return &Sender{client: &c, timeout: attemptTimeout}
}

// Send makes one attempt of m to url. The error says why no response came: ErrInvalidURL,
// or the client's error (refused by the SSRF guard, timed out, the connection failed). A
// response of any status is no error.
func (s *Sender) Send(ctx context.Context, url string, m Message) (Response, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(m.Body))
	if err != nil {
		return Response{Duration: time.Since(start)}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	for k, v := range m.Headers() {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return Response{Duration: time.Since(start)}, err
	}
	defer resp.Body.Close()
	r := Response{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header, Excerpt: readExcerpt(resp.Body)}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	r.Duration = time.Since(start)
	return r, nil
}

// readExcerpt reads the start of a response body as text.
func readExcerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 4*maxExcerpt))
	return truncate(string(b))
}

// truncate makes s valid UTF-8 of at most maxExcerpt characters (the columns' limit).
func truncate(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= maxExcerpt {
		return s
	}
	r := []rune(s)
	return string(r[:maxExcerpt])
}
