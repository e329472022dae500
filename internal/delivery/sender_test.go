package delivery

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// One attempt, as the workers and the API's test endpoint both make it: the signed body with
// every documented header and the User-Agent, whatever the kind of target.
func TestAnAttemptCarriesTheSignedBodyAndEveryHeader(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, answer(200, "ok"))
	secret := signing.NewSecret()
	key, _ := signing.Key(secret)
	at := time.Now().Truncate(time.Second)
	body := []byte(`{"event":"conversion.created","data":{"id":"cnv_1"},"timestamp":"2026-11-24T10:00:00Z"}`)
	s := NewSender(&http.Client{})
	for kind, sigHeader := range map[string]string{KindWebhook: "X-Webhook-Signature", KindPostback: "x-svc-signature"} {
		m := Message{ID: "msg_" + kind, Kind: kind, Body: body, At: at, Keys: []signing.HMACKey{{Key: key}}}
		resp, err := s.Send(context.Background(), rc.URL+"/"+kind, m)
		if err != nil || resp.StatusCode != 200 || !resp.Succeeded() || resp.Excerpt != "ok" || resp.Duration <= 0 {
			t.Fatalf("%s: %+v, %v", kind, resp, err)
		}
		reqs := rc.requests()
		r := reqs[len(reqs)-1]
		if string(r.body) != string(body) {
			t.Errorf("%s: body %s", kind, r.body)
		}
		if err := verify(t, r, secret, true); err != nil {
			t.Errorf("%s: the Standard Webhooks library refuses the attempt: %v", kind, err)
		}
		want := map[string]string{
			"webhook-id": m.ID, "webhook-timestamp": strconv.FormatInt(at.Unix(), 10), sigHeader: r.header.Get("webhook-signature"),
			"Content-Type": "application/json", "User-Agent": userAgent,
		}
		for h, v := range want {
			if got := r.header.Get(h); got != v || v == "" {
				t.Errorf("%s: %s = %q, want %q", kind, h, got, v)
			}
		}
		other := map[string]string{"X-Webhook-Signature": "x-svc-signature", "x-svc-signature": "X-Webhook-Signature"}[sigHeader]
		if r.header.Get(other) != "" {
			t.Errorf("%s: has both signature headers", kind)
		}
		// Headers names what the attempt sends, but the User-Agent.
		for h, v := range m.Headers() {
			if r.header.Get(h) != v {
				t.Errorf("%s: Headers has %s = %q, the request %q", kind, h, v, r.header.Get(h))
			}
		}
	}
	if !strings.HasPrefix(userAgent, "PartnerStream-Webhooks/") {
		t.Errorf("User-Agent %q", userAgent)
	}
}

func TestAnAttemptsAnswer(t *testing.T) {
	t.Parallel()
	key, _ := signing.Key(signing.NewSecret())
	m := Message{ID: "msg_1", Kind: KindWebhook, Body: []byte("{}"), At: time.Now(), Keys: []signing.HMACKey{{Key: key}}}
	send := func(t *testing.T, respond func(http.ResponseWriter, *http.Request), timeout time.Duration) (Response, *receiver, error) {
		t.Helper()
		rc := newReceiver(t, respond)
		// A client that follows redirects and has no timeout: the sender decides both.
		s := NewSender(&http.Client{})
		if timeout > 0 {
			s.timeout = timeout
		}
		resp, err := s.Send(context.Background(), rc.URL+"/hook", m)
		return resp, rc, err
	}

	t.Run("a redirect is the answer, not followed", func(t *testing.T) {
		t.Parallel()
		resp, rc, err := send(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				w.WriteHeader(200)
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, 0)
		if err != nil || resp.StatusCode != 302 || resp.Succeeded() || resp.Header.Get("Location") != "/elsewhere" || len(rc.requests()) != 1 {
			t.Fatalf("%+v, %v after %d requests", resp, err, len(rc.requests()))
		}
	})
	t.Run("an error status is an answer, not an error", func(t *testing.T) {
		t.Parallel()
		resp, _, err := send(t, answer(503, "busy"), 0)
		if err != nil || resp.StatusCode != 503 || resp.Status != "503 Service Unavailable" || resp.Succeeded() || resp.Excerpt != "busy" {
			t.Fatalf("%+v, %v", resp, err)
		}
	})
	t.Run("a long answer is cut to 1024 characters of valid UTF-8", func(t *testing.T) {
		t.Parallel()
		resp, _, err := send(t, answer(200, "\xff"+strings.Repeat("é", 3000)), 0)
		if want := "\uFFFD" + strings.Repeat("é", 1023); err != nil || resp.Excerpt != want {
			t.Fatalf("excerpt %.40q (%d characters), %v; want %.40q", resp.Excerpt, len([]rune(resp.Excerpt)), err, want)
		}
	})
	t.Run("a receiver slower than the timeout is an error", func(t *testing.T) {
		t.Parallel()
		resp, _, err := send(t, func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, 200*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) || resp.StatusCode != 0 || resp.Duration < 200*time.Millisecond {
			t.Fatalf("%+v, %v; want a timeout after 200 ms", resp, err)
		}
	})
	t.Run("an invalid URL is no request", func(t *testing.T) {
		t.Parallel()
		if _, err := NewSender(&http.Client{}).Send(context.Background(), "http://a b/", m); !errors.Is(err, ErrInvalidURL) {
			t.Fatalf("error %v, want ErrInvalidURL", err)
		}
	})
	if s := NewSender(&http.Client{}); s.timeout != 15*time.Second {
		t.Errorf("an attempt has %s, want 15 s", s.timeout)
	}
}
