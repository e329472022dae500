// Package mailer sends the platform's e-mails: over SMTP in production, or into the log in
// `partnerstream dev` when no SMTP server is configured.
package mailer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"strconv"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Message is one e-mail to one recipient. Text is required; HTML, when set, is sent as an
// alternative that mail clients may show instead.
type Message struct {
	To, Subject, Text, HTML string
}

// Mailer sends messages. Send returns once the SMTP server has accepted the message for
// delivery; it does not know whether the recipient's mailbox exists.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// TLS modes of an SMTP connection.
const (
	TLSNone     = "none"     // plain text: only for a relay on a trusted network
	TLSStartTLS = "starttls" // plain connection upgraded with STARTTLS, which must succeed
	TLSImplicit = "tls"      // TLS from the first byte (SMTPS, usually port 465)
)

// DefaultTimeout bounds one message's whole SMTP conversation when SMTPConfig.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// SMTPConfig says how to reach the SMTP server (a relay such as Postmark, SES, Mailgun or the
// organisation's own).
type SMTPConfig struct {
	Host string
	// Port defaults by TLS mode: 25 for none, 587 for starttls, 465 for tls.
	Port int
	// TLS is none, starttls or tls; empty means starttls.
	TLS string
	// Username and Password, when set, authenticate with the strongest mechanism the server
	// offers. They need TLS: they are refused with TLS none.
	Username, Password string
	// From is the sender, e.g. "PartnerStream <no-reply@example.com>".
	From string
	// Timeout bounds one message's SMTP conversation; zero means DefaultTimeout.
	Timeout time.Duration
	// RootCAs verifies the server's certificate instead of the system's roots (a private CA,
	// tests); nil means the system's roots.
	RootCAs *x509.CertPool
}

// NewSMTP returns a Mailer that sends through the SMTP server of cfg, or an error that names
// the setting that is wrong. It does not connect: an unreachable server shows in Send.
func NewSMTP(cfg SMTPConfig) (Mailer, error) {
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	// Building one client checks the options the way Send will use them.
	if _, err := gomail.NewClient(cfg.Host, opts...); err != nil {
		return nil, fmt.Errorf("mailer: smtp: %w", err)
	}
	return &smtpMailer{host: cfg.Host, from: cfg.From, opts: opts, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.port()))}, nil
}

func (c SMTPConfig) options() ([]gomail.Option, error) {
	if c.Host == "" {
		return nil, errors.New("mailer: smtp host is required")
	}
	if c.Port < 0 || c.Port > 65535 {
		return nil, fmt.Errorf("mailer: smtp port %d: want 1 to 65535 (0 picks the TLS mode's usual port)", c.Port)
	}
	if c.Timeout < 0 {
		return nil, fmt.Errorf("mailer: smtp timeout %v: must not be negative", c.Timeout)
	}
	if c.From == "" {
		return nil, errors.New("mailer: smtp sender (from) is required")
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		return nil, fmt.Errorf("mailer: smtp sender (from) %q: %w", c.From, err)
	}
	if c.Password != "" && c.Username == "" {
		return nil, errors.New("mailer: smtp password is set without a username")
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	opts := []gomail.Option{
		gomail.WithPort(c.port()),
		gomail.WithTimeout(timeout),
		gomail.WithTLSConfig(&tls.Config{ServerName: c.Host, RootCAs: c.RootCAs, MinVersion: tls.VersionTLS12}),
	}
	switch c.tlsMode() {
	case TLSNone:
		if c.Username != "" {
			return nil, errors.New("mailer: smtp username is set with TLS none: credentials would cross the network in clear; use starttls or tls")
		}
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	case TLSStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	default:
		return nil, fmt.Errorf("mailer: smtp tls %q: want %s, %s or %s", c.TLS, TLSNone, TLSStartTLS, TLSImplicit)
	}
	if c.Username != "" {
		opts = append(opts,
			gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(c.Username),
			gomail.WithPassword(c.Password))
	}
	return opts, nil
}

func (c SMTPConfig) tlsMode() string {
	if c.TLS == "" {
		return TLSStartTLS
	}
	return c.TLS
}

func (c SMTPConfig) port() int {
	if c.Port != 0 {
		return c.Port
	}
	switch c.tlsMode() {
	case TLSNone:
		return 25
	case TLSImplicit:
		return 465
	}
	return 587
}

type smtpMailer struct {
	host, from, addr string
	opts             []gomail.Option
}

// Send opens one SMTP connection per message: sign-in codes are rare and a connection kept
// open between them would be dropped by most servers anyway. A fresh client per call also
// shares no state between concurrent requests.
func (s *smtpMailer) Send(ctx context.Context, m Message) error {
	msg, err := s.build(m)
	if err != nil {
		return err
	}
	client, err := gomail.NewClient(s.host, s.opts...)
	if err != nil {
		return fmt.Errorf("mailer: smtp %s: %w", s.addr, err)
	}
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("mailer: send via smtp %s: %w", s.addr, err)
	}
	return nil
}

func (s *smtpMailer) build(m Message) (*gomail.Msg, error) {
	if m.Text == "" {
		return nil, errors.New("mailer: message has no text")
	}
	msg := gomail.NewMsg()
	if err := msg.From(s.from); err != nil {
		return nil, fmt.Errorf("mailer: sender %q: %w", s.from, err)
	}
	if err := msg.To(m.To); err != nil {
		return nil, fmt.Errorf("mailer: recipient %q: %w", m.To, err)
	}
	msg.Subject(m.Subject)
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// NewLog returns a Mailer that writes each message, text included, to the log instead of
// sending it. It is for `partnerstream dev` without an SMTP server, where reading a sign-in
// code in the log is the point; never use it in production, where that log would hold secrets.
func NewLog(logger *slog.Logger) Mailer {
	return logMailer{log: logger}
}

type logMailer struct{ log *slog.Logger }

func (l logMailer) Send(ctx context.Context, m Message) error {
	l.log.InfoContext(ctx, "mail not sent (no SMTP server configured); its text follows",
		"to", m.To, "subject", m.Subject, "text", m.Text)
	return nil
}
