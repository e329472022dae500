package mailer_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/mailer"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

const wait = 5 * time.Second

// config points an SMTPConfig at a testenv server.
func config(t *testing.T, addr string) mailer.SMTPConfig {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return mailer.SMTPConfig{Host: host, Port: p, TLS: mailer.TLSNone, From: "PartnerStream <no-reply@partnerstream.test>", Timeout: wait}
}

func newSMTP(t *testing.T, cfg mailer.SMTPConfig) mailer.Mailer {
	t.Helper()
	m, err := mailer.NewSMTP(cfg)
	if err != nil {
		t.Fatalf("NewSMTP: %v", err)
	}
	return m
}

func TestNewSMTPRejectsWrongSettings(t *testing.T) {
	t.Parallel()
	valid := mailer.SMTPConfig{Host: "smtp.example.com", From: "no-reply@example.com"}
	tests := []struct {
		name   string
		change func(*mailer.SMTPConfig)
		want   string
	}{
		{"a missing host", func(c *mailer.SMTPConfig) { c.Host = "" }, "host is required"},
		{"an unknown TLS mode", func(c *mailer.SMTPConfig) { c.TLS = "ssl" }, `tls "ssl": want none, starttls or tls`},
		{"a port out of range", func(c *mailer.SMTPConfig) { c.Port = 70000 }, "port 70000"},
		{"a negative timeout", func(c *mailer.SMTPConfig) { c.Timeout = -time.Second }, "timeout"},
		{"a missing sender", func(c *mailer.SMTPConfig) { c.From = "" }, "sender (from) is required"},
		{"a sender that is not an address", func(c *mailer.SMTPConfig) { c.From = "no reply" }, `sender (from) "no reply"`},
		{"a password without a username", func(c *mailer.SMTPConfig) { c.Password = "pw" }, "password is set without a username"},
		{"credentials without TLS", func(c *mailer.SMTPConfig) { c.TLS, c.Username = mailer.TLSNone, "u" }, "in clear"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.change(&cfg)
			_, err := mailer.NewSMTP(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewSMTP error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := mailer.NewSMTP(valid); err != nil {
		t.Fatalf("NewSMTP of a valid config: %v", err)
	}
}

func TestSendDeliversTextAndHTML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  mailer.Message
	}{
		{"plain text with non-ASCII subject and body", mailer.Message{To: "ana@example.com", Subject: "Tu código de acceso", Text: "Tu código es 012345.\nVálido 10 minutos."}},
		{"text with an HTML alternative", mailer.Message{To: "bob@example.com", Subject: "Hello", Text: "Hello in text", HTML: "<p>Hello in <b>HTML</b></p>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, inbox := testenv.SMTP(t)
			if err := newSMTP(t, config(t, addr)).Send(context.Background(), tt.msg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := inbox.Wait(t, tt.msg.To, wait)
			if got.From != "no-reply@partnerstream.test" {
				t.Errorf("envelope sender = %q", got.From)
			}
			if got.Subject != tt.msg.Subject {
				t.Errorf("subject = %q, want %q", got.Subject, tt.msg.Subject)
			}
			if normalize(got.Text) != tt.msg.Text {
				t.Errorf("text = %q, want %q", got.Text, tt.msg.Text)
			}
			if normalize(got.HTML) != tt.msg.HTML {
				t.Errorf("html = %q, want %q", got.HTML, tt.msg.HTML)
			}
		})
	}
}

// normalize undoes the CRLF line endings of SMTP and the final line break of a body.
func normalize(s string) string { return strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n") }

func TestSendOverTLSWithCredentials(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{mailer.TLSStartTLS, mailer.TLSImplicit} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			addr, inbox := testenv.SMTPWith(t, testenv.SMTPOptions{TLS: mode, Username: "relay-user", Password: "relay-pass"})
			cfg := config(t, addr)
			cfg.TLS, cfg.Username, cfg.Password, cfg.RootCAs = mode, "relay-user", "relay-pass", inbox.RootCAs()
			msg := mailer.Message{To: "carol@example.com", Subject: "Over " + mode, Text: "secret stuff"}
			if err := newSMTP(t, cfg).Send(context.Background(), msg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got := inbox.Wait(t, msg.To, wait); got.Username != "relay-user" || got.Subject != msg.Subject {
				t.Fatalf("received subject %q authenticated as %q", got.Subject, got.Username)
			}
		})
	}
}

func TestSendFails(t *testing.T) {
	t.Parallel()
	msg := mailer.Message{To: "dave@example.com", Subject: "s", Text: "t"}
	tests := []struct {
		name   string
		server testenv.SMTPOptions
		change func(*mailer.SMTPConfig, *testenv.Inbox)
		want   string
	}{
		{
			"when STARTTLS is required but the server does not offer it (no downgrade)",
			testenv.SMTPOptions{},
			func(c *mailer.SMTPConfig, _ *testenv.Inbox) { c.TLS = mailer.TLSStartTLS },
			"STARTTLS",
		},
		{
			"when the server's certificate is not trusted",
			testenv.SMTPOptions{TLS: "starttls"},
			func(c *mailer.SMTPConfig, _ *testenv.Inbox) { c.TLS = mailer.TLSStartTLS },
			"certificate",
		},
		{
			"when the password is wrong",
			testenv.SMTPOptions{TLS: "tls", Username: "u", Password: "right"},
			func(c *mailer.SMTPConfig, in *testenv.Inbox) {
				c.TLS, c.Username, c.Password, c.RootCAs = mailer.TLSImplicit, "u", "wrong", in.RootCAs()
			},
			"AUTH",
		},
		{
			"when the server wants credentials and gets none",
			testenv.SMTPOptions{TLS: "starttls", Username: "u", Password: "p"},
			func(c *mailer.SMTPConfig, in *testenv.Inbox) { c.TLS, c.RootCAs = mailer.TLSStartTLS, in.RootCAs() },
			"authenticate",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, inbox := testenv.SMTPWith(t, tt.server)
			cfg := config(t, addr)
			tt.change(&cfg, inbox)
			err := newSMTP(t, cfg).Send(context.Background(), msg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Send error = %v, want one containing %q", err, tt.want)
			}
			if n := inbox.Count(msg.To); n != 0 {
				t.Fatalf("%d messages delivered, want none", n)
			}
		})
	}

	t.Run("when no server listens", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		err = newSMTP(t, config(t, addr)).Send(context.Background(), msg)
		if err == nil || !strings.Contains(err.Error(), addr) {
			t.Fatalf("Send error = %v, want one naming %s", err, addr)
		}
	})
}

func TestSendIsSafeConcurrently(t *testing.T) {
	t.Parallel()
	addr, inbox := testenv.SMTP(t)
	m := newSMTP(t, config(t, addr))
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- m.Send(context.Background(), mailer.Message{To: "eve@example.com", Subject: fmt.Sprint(i), Text: "t"})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Send: %v", err)
		}
	}
	if got := inbox.Count("EVE@example.com"); got != n {
		t.Fatalf("%d messages received, want %d", got, n)
	}
}

func TestLogMailerWritesTheTextToTheLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := mailer.NewLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	if err := m.Send(context.Background(), mailer.Message{To: "frank@example.com", Subject: "Code", Text: "Your code is 424242"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	for _, want := range []string{"frank@example.com", "Your code is 424242", `"subject":"Code"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}
}
