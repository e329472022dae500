package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SASL mechanisms the clients speak: the ones managed Kafka services (MSK, Confluent Cloud,
// Aiven, Redpanda Cloud) offer besides IAM and OAuth.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLMechanisms are the values SASLSettings.Mechanism takes, besides empty (no SASL).
var SASLMechanisms = []string{SASLPlain, SASLScramSHA256, SASLScramSHA512}

// TLSSettings say how to encrypt the connections to the brokers and whom to trust.
type TLSSettings struct {
	// Enabled turns TLS on; the other fields need it.
	Enabled bool
	// CAFile is a PEM bundle of the CAs the brokers' certificates are signed by; empty
	// trusts the system's CAs (enough for managed services with public certificates).
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM), for brokers that
	// authenticate clients by certificate (mTLS); both or neither.
	CertFile, KeyFile string
	// ServerName is the name the brokers' certificates must carry; empty takes the host of
	// each broker address dialled.
	ServerName string
}

// SASLSettings say how to authenticate to the brokers.
type SASLSettings struct {
	// Mechanism is one of SASLMechanisms, or empty for no SASL.
	Mechanism string
	Username  string
	Password  Password
}

// Password is a credential; it prints redacted, so a configuration logged or wrapped into
// an error with %v or %+v never shows it.
type Password string

func (Password) String() string   { return "[redacted]" }
func (Password) GoString() string { return `"[redacted]"` }

// SettingError names the security setting that is wrong (tls-ca-file, sasl-mechanism, ...),
// so a caller that reads the settings from flags can name the flag.
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return fmt.Sprintf("kafka: %s: %v", e.Setting, e.Err) }
func (e *SettingError) Unwrap() error { return e.Err }

// Security is how every connection to the brokers is made: TLS and SASL, read and checked
// once by NewSecurity. Config.Security carries it to every dialer and transport this package
// builds (producer, consumer group, partition fetches, topic creation, inspection, the
// readiness probe), so no path can connect without it. A nil *Security is plaintext without
// authentication, what the embedded broker speaks by default.
type Security struct {
	tls  *tls.Config
	sasl sasl.Mechanism
}

// NewSecurity reads the CA bundle and client certificate and checks the settings; every
// problem is a *SettingError. It returns nil, not an error, when neither TLS nor SASL is on.
func NewSecurity(t TLSSettings, s SASLSettings) (*Security, error) {
	var sec Security
	var errs []error
	if t.Enabled {
		cfg, err := t.config()
		if err != nil {
			errs = append(errs, err)
		}
		sec.tls = cfg
	} else {
		for _, f := range []struct{ setting, value string }{{"tls-ca-file", t.CAFile}, {"tls-cert-file", t.CertFile}, {"tls-key-file", t.KeyFile}, {"tls-server-name", t.ServerName}} {
			if f.value != "" {
				errs = append(errs, &SettingError{f.setting, errors.New("is set but TLS is off; turn TLS on too")})
			}
		}
	}
	mech, err := s.mechanism()
	if err != nil {
		errs = append(errs, err)
	}
	sec.sasl = mech
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if sec.tls == nil && sec.sasl == nil {
		return nil, nil
	}
	return &sec, nil
}

func (t TLSSettings) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	var errs []error
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			errs = append(errs, &SettingError{"tls-ca-file", fmt.Errorf("read the CA bundle: %w", err)})
		} else {
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				errs = append(errs, &SettingError{"tls-ca-file", fmt.Errorf("%s holds no PEM certificate", t.CAFile)})
			}
		}
	}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
	case t.CertFile == "":
		errs = append(errs, &SettingError{"tls-cert-file", errors.New("is required with a client key")})
	case t.KeyFile == "":
		errs = append(errs, &SettingError{"tls-key-file", errors.New("is required with a client certificate")})
	default:
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			errs = append(errs, &SettingError{"tls-cert-file", fmt.Errorf("load the client certificate and key: %w", err)})
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if t.ServerName != "" && strings.ContainsAny(t.ServerName, " /:") {
		errs = append(errs, &SettingError{"tls-server-name", fmt.Errorf("%q is not a host name", t.ServerName)})
	}
	return cfg, errors.Join(errs...)
}

func (s SASLSettings) mechanism() (sasl.Mechanism, error) {
	name := strings.ToUpper(s.Mechanism)
	if name == "" || name == "NONE" {
		if s.Username != "" || s.Password != "" {
			return nil, &SettingError{"sasl-mechanism", errors.New("is required with a user name or password")}
		}
		return nil, nil
	}
	if !slices.Contains(SASLMechanisms, name) {
		return nil, &SettingError{"sasl-mechanism", fmt.Errorf("%q is not one of %s", s.Mechanism, strings.Join(SASLMechanisms, ", "))}
	}
	var errs []error
	if s.Username == "" {
		errs = append(errs, &SettingError{"sasl-username", fmt.Errorf("is required with %s", name)})
	}
	if s.Password == "" {
		errs = append(errs, &SettingError{"sasl-password", fmt.Errorf("is required with %s", name)})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if name == SASLPlain {
		return plain.Mechanism{Username: s.Username, Password: string(s.Password)}, nil
	}
	algo := scram.SHA256
	if name == SASLScramSHA512 {
		algo = scram.SHA512
	}
	m, err := scram.Mechanism(algo, s.Username, string(s.Password))
	if err != nil {
		// SCRAM prepares the user name and password (SASLprep); a control character fails it.
		return nil, &SettingError{"sasl-username", fmt.Errorf("%s refuses the user name or password: %w", name, err)}
	}
	return m, nil
}

// TLS reports whether connections are encrypted.
func (s *Security) TLS() bool { return s != nil && s.tls != nil }

// SASL is the mechanism connections authenticate with, empty for none.
func (s *Security) SASL() string {
	if s == nil || s.sasl == nil {
		return ""
	}
	return s.sasl.Name()
}

func (s *Security) tlsConfig() *tls.Config {
	if s == nil {
		return nil
	}
	return s.tls
}

func (s *Security) mechanism() sasl.Mechanism {
	if s == nil {
		return nil
	}
	return s.sasl
}

// dialer is the one kafka-go Dialer of the package (group coordination, partition leaders,
// topic creation, the readiness probe).
func (c Config) dialer() *kafkago.Dialer {
	return &kafkago.Dialer{ClientID: c.clientID(), Timeout: dialTimeout, DualStack: true,
		TLS: c.Security.tlsConfig(), SASLMechanism: c.Security.mechanism()}
}

// transport is the one kafka-go Transport of the package (the producer and inspection). It
// dials with a net.Dialer bounded by dialTimeout and does TLS and SASL on top.
func (c Config) transport() *kafkago.Transport {
	d := &net.Dialer{Timeout: dialTimeout}
	return &kafkago.Transport{Dial: d.DialContext, DialTimeout: dialTimeout, ClientID: c.clientID(),
		TLS: c.Security.tlsConfig(), SASL: c.Security.mechanism()}
}
