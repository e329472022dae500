package testenv

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/partnerstream/partnerstream/internal/mailer"
)

// Message is an e-mail received by the SMTP server of SMTP or SMTPWith.
type Message struct {
	From     string   // envelope sender (MAIL FROM)
	To       []string // envelope recipients (RCPT TO)
	Header   mail.Header
	Subject  string // decoded from its MIME encoded-words
	Text     string // the text/plain body, transfer encoding undone
	HTML     string // the text/html alternative, if any
	Username string // who authenticated with AUTH, if anyone did
	Raw      []byte
}

// SMTPOptions shapes the server of SMTPWith.
type SMTPOptions struct {
	// TLS is "" or "none" (plain), "starttls" (offers STARTTLS) or "tls" (TLS from the first
	// byte). The certificate is self-signed for 127.0.0.1: trust Inbox.RootCAs.
	TLS string
	// Username and Password, when set, are required through AUTH PLAIN before MAIL FROM, which
	// the server offers only over TLS unless TLS is none.
	Username, Password string
	// Listen is the address to listen on; empty means a free loopback port. A local
	// cluster's pods reach the server on the node's address.
	Listen string
}

// SMTP starts a plain SMTP server on a free loopback port for this test alone and returns its
// address and the inbox where it keeps every message it accepts. Like Kafka, it needs no
// external service and never skips. The server stops when the test ends.
func SMTP(t testing.TB) (addr string, inbox *Inbox) {
	t.Helper()
	return SMTPWith(t, SMTPOptions{})
}

// SMTPMailer is an SMTP listener (see SMTP) and a mailer that sends to it in plain text, for
// the components that send sign-in codes.
func SMTPMailer(t testing.TB) (mailer.Mailer, *Inbox) {
	t.Helper()
	addr, inbox := SMTP(t)
	host, port, _ := net.SplitHostPort(addr)
	portN, _ := strconv.Atoi(port)
	m, err := mailer.NewSMTP(mailer.SMTPConfig{Host: host, Port: portN, TLS: mailer.TLSNone, From: "PartnerStream <no-reply@example.test>"})
	if err != nil {
		t.Fatalf("testenv: mailer: %v", err)
	}
	return m, inbox
}

// SMTPWith is SMTP with TLS and authentication.
func SMTPWith(t testing.TB, opts SMTPOptions) (addr string, inbox *Inbox) {
	t.Helper()
	inbox = &Inbox{changed: make(chan struct{}), taken: map[string]int{}}
	srv := smtp.NewServer(&smtpBackend{inbox: inbox, opts: opts})
	srv.Domain = "localhost"
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 10 << 20
	srv.EnableSMTPUTF8 = true
	// The server logs from its own goroutines, possibly after the test has ended, when t.Logf
	// would panic; a failed delivery shows up as the client's error instead.
	srv.ErrorLog = log.New(io.Discard, "", 0)

	listen := opts.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("testenv: smtp listen: %v", err)
	}
	switch opts.TLS {
	case "", "none":
		srv.AllowInsecureAuth = true
	case "starttls", "tls":
		cfg, pool := selfSignedTLS(t)
		inbox.rootCAs = pool
		if opts.TLS == "tls" {
			l = tls.NewListener(l, cfg)
		} else {
			srv.TLSConfig = cfg
		}
	default:
		_ = l.Close()
		t.Fatalf("testenv: smtp TLS %q: want none, starttls or tls", opts.TLS)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), inbox
}

// Inbox holds the messages an SMTP test server accepted.
type Inbox struct {
	mu       sync.Mutex
	messages []Message
	// taken counts, per recipient, the messages Wait has returned already.
	taken map[string]int
	// changed is closed, and replaced, whenever a message arrives.
	changed chan struct{}
	rootCAs *x509.CertPool
}

// Wait returns the next message to recipient to (case-insensitive) that Wait has not returned
// before, in the order they arrived, waiting up to timeout for it; it fails the test after that.
func (in *Inbox) Wait(t testing.TB, to string, timeout time.Duration) Message {
	t.Helper()
	to = strings.ToLower(to)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		in.mu.Lock()
		matching := in.to(to)
		if n := in.taken[to]; n < len(matching) {
			in.taken[to] = n + 1
			in.mu.Unlock()
			return matching[n]
		}
		changed := in.changed
		in.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("testenv: no new e-mail to %s within %v (%d received, %d already taken)",
				to, timeout, in.Count(to), in.takenCount(to))
			return Message{}
		}
	}
}

// Count returns how many messages have arrived for recipient to (case-insensitive).
func (in *Inbox) Count(to string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.to(strings.ToLower(to)))
}

// RootCAs trusts the server's self-signed certificate (nil for a plain server).
func (in *Inbox) RootCAs() *x509.CertPool { return in.rootCAs }

func (in *Inbox) takenCount(to string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.taken[to]
}

// to returns the messages for a lowercase recipient; the caller holds mu.
func (in *Inbox) to(rcpt string) []Message {
	var out []Message
	for _, m := range in.messages {
		for _, r := range m.To {
			if strings.ToLower(r) == rcpt {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

func (in *Inbox) add(m Message) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.messages = append(in.messages, m)
	close(in.changed)
	in.changed = make(chan struct{})
}

type smtpBackend struct {
	inbox *Inbox
	opts  SMTPOptions
}

func (b *smtpBackend) NewSession(*smtp.Conn) (smtp.Session, error) {
	return &smtpSession{backend: b}, nil
}

type smtpSession struct {
	backend  *smtpBackend
	username string
	from     string
	to       []string
}

func (s *smtpSession) AuthMechanisms() []string {
	if s.backend.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *smtpSession) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain || s.backend.opts.Username == "" {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != s.backend.opts.Username || password != s.backend.opts.Password {
			return smtp.ErrAuthFailed
		}
		s.username = username
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.backend.opts.Username != "" && s.username == "" {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

// Data keeps the message only if it parses, so a sender that writes broken MIME sees its
// Send fail.
func (s *smtpSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m, err := parseMessage(raw)
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "testenv: unparseable message: " + err.Error()}
	}
	m.From, m.To, m.Username = s.from, s.to, s.username
	s.backend.inbox.add(m)
	return nil
}

func (s *smtpSession) Reset() { s.from, s.to = "", nil }

func (s *smtpSession) Logout() error { return nil }

func parseMessage(raw []byte) (Message, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, fmt.Errorf("read message: %w", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return Message{}, fmt.Errorf("decode subject: %w", err)
	}
	m := Message{Header: msg.Header, Subject: subject, Raw: raw}
	if err := readBody(textproto.MIMEHeader(msg.Header), msg.Body, &m); err != nil {
		return Message{}, err
	}
	return m, nil
}

// readBody fills m.Text and m.HTML from a (possibly multipart) body, taking the first part
// of each type.
func readBody(h textproto.MIMEHeader, body io.Reader, m *Message) error {
	ct := h.Get("Content-Type")
	if ct == "" {
		ct = "text/plain"
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("content type %q: %w", ct, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("multipart: %w", err)
			}
			if err := readBody(part.Header, part, m); err != nil {
				return err
			}
		}
	}
	// multipart.Reader undoes quoted-printable by itself and drops the header; base64 it leaves.
	switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body)
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("%s body: %w", mediaType, err)
	}
	switch {
	case mediaType == "text/plain" && m.Text == "":
		m.Text = string(b)
	case mediaType == "text/html" && m.HTML == "":
		m.HTML = string(b)
	}
	return nil
}

// selfSignedTLS makes a throwaway certificate for 127.0.0.1 and localhost, and a pool that
// trusts it.
func selfSignedTLS(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testenv: smtp tls key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "testenv smtp"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testenv: smtp tls certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testenv: smtp tls certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}
