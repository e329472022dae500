package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/kafka/embedded"
)

// testCA is a certificate authority made for one test; its certificate is written to a
// file, as an operator's CA bundle would be mounted.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := writePEM(t, name+".crt", "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue signs a certificate for 127.0.0.1 (a broker) or a client, and returns it for a
// tls.Config and as PEM files.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (cert tls.Certificate, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writePEM(t, name+".crt", "CERTIFICATE", der)
	keyFile = writePEM(t, name+".key", "EC PRIVATE KEY", keyDER)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certFile, keyFile
}

func writePEM(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// brokerTLS is the TLS of an embedded broker whose certificate ca signed.
func brokerTLS(t *testing.T, ca *testCA) *tls.Config {
	cert, _, _ := ca.issue(t, "broker", x509.ExtKeyUsageServerAuth)
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

func startBroker(t *testing.T, o embedded.Options) []string {
	t.Helper()
	b, err := embedded.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Addrs()
}

func secure(t *testing.T, brokers []string, ts kafka.TLSSettings, ss kafka.SASLSettings) kafka.Config {
	t.Helper()
	sec, err := kafka.NewSecurity(ts, ss)
	if err != nil {
		t.Fatalf("NewSecurity: %v", err)
	}
	cfg := testConfig(brokers)
	cfg.Security = sec
	return cfg
}

// Every path of the package (readiness probe, topic creation, producer, consumer group with
// its partition fetches and commits, inspection) connects through TLS and SASL when they are
// set: the brokers here refuse anything else.
func TestEveryPathConnectsWithTLSAndSASL(t *testing.T) {
	ca := newCA(t, "kafka-ca")
	_, clientCert, clientKey := ca.issue(t, "partnerstream", x509.ExtKeyUsageClientAuth)
	mutual := brokerTLS(t, ca)
	mutual.ClientAuth, mutual.ClientCAs = tls.RequireAndVerifyClientCert, x509.NewCertPool()
	mutual.ClientCAs.AddCert(ca.cert)
	user := func(mech string) []embedded.User {
		return []embedded.User{{Mechanism: mech, Name: "partnerstream", Password: "s3cret-" + mech}}
	}
	login := func(mech string) kafka.SASLSettings {
		return kafka.SASLSettings{Mechanism: mech, Username: "partnerstream", Password: kafka.Password("s3cret-" + mech)}
	}
	cases := []struct {
		name        string
		broker      embedded.Options
		tls         kafka.TLSSettings
		sasl        kafka.SASLSettings
		compression string
	}{
		{name: "TLS", broker: embedded.Options{TLS: brokerTLS(t, ca)}, tls: kafka.TLSSettings{Enabled: true, CAFile: ca.file}},
		{name: "TLS with a client certificate", broker: embedded.Options{TLS: mutual},
			tls: kafka.TLSSettings{Enabled: true, CAFile: ca.file, CertFile: clientCert, KeyFile: clientKey, ServerName: "localhost"}},
		{name: "SASL PLAIN", broker: embedded.Options{Users: user(kafka.SASLPlain)}, sasl: login(kafka.SASLPlain)},
		{name: "SASL SCRAM-SHA-256", broker: embedded.Options{Users: user(kafka.SASLScramSHA256)}, sasl: login(kafka.SASLScramSHA256)},
		{name: "SASL SCRAM-SHA-512", broker: embedded.Options{Users: user(kafka.SASLScramSHA512)}, sasl: login(kafka.SASLScramSHA512)},
		// What MSK and Confluent Cloud ask for.
		{name: "SCRAM-SHA-512 over TLS, zstd", broker: embedded.Options{TLS: brokerTLS(t, ca), Users: user(kafka.SASLScramSHA512)},
			tls: kafka.TLSSettings{Enabled: true, CAFile: ca.file}, sasl: login(kafka.SASLScramSHA512), compression: "zstd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := secure(t, startBroker(t, c.broker), c.tls, c.sasl)
			cfg.Compression = c.compression
			ctx := testContext(t, 60*time.Second)

			// Without the settings the broker refuses the client: the case tests something.
			plain := cfg
			plain.Security = nil
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if err := kafka.EnsureTopics(pctx, plain, kafka.TopicEvents); err == nil {
				t.Fatal("a client without TLS and SASL created a topic")
			}

			roundTrip(ctx, t, cfg, "secure")
		})
	}
}

// roundTrip runs every path of the package against cfg's brokers.
func roundTrip(ctx context.Context, t *testing.T, cfg kafka.Config, group string) {
	t.Helper()
	if err := kafka.Ping(ctx, cfg); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicEvents); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	p := kafka.NewProducer(cfg, kafka.TopicEvents, kafka.ProducerOptions{})
	defer p.Close()
	msgs := keyedMessages(group, 20)
	if err := kafka.FirstError(p.Produce(ctx, msgs)); err != nil {
		t.Fatalf("Produce: %v", err)
	}
	assertSameMessages(t, consume(ctx, t, cfg, kafka.TopicEvents, group, len(msgs), true), msgs)
	ends, committed, err := kafka.Offsets(ctx, cfg, group, kafka.TopicEvents)
	if err != nil {
		t.Fatalf("Offsets: %v", err)
	}
	for part, end := range ends {
		if end > 0 && committed[part] != end {
			t.Errorf("partition %d: committed %d of %d", part, committed[part], end)
		}
	}
	stored, err := kafka.ReadAll(ctx, cfg, kafka.TopicEvents)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	assertSameMessages(t, stored, msgs)
}

// A wrong password or a broker certificate from an unknown CA fails every path at once,
// instead of retrying until a deadline, and the paths a component takes at start (Ping,
// EnsureTopics) and its consumer groups say why.
//
// The producer and inspection (kafka-go's Transport) say why too against a real Kafka,
// which answers a failed SASL exchange with SASL_AUTHENTICATION_FAILED; the embedded broker
// closes the connection instead, which the Transport reports as an unexpected EOF, so for
// them only the failing fast is checked here.
func TestWrongCredentialsFailFastAndSaySo(t *testing.T) {
	ca, other := newCA(t, "kafka-ca"), newCA(t, "someone-else")
	cases := []struct {
		name   string
		broker embedded.Options
		tls    kafka.TLSSettings
		sasl   kafka.SASLSettings
		want   func(error) bool
		says   string
		// transportSays is whether the Transport's paths must say why too.
		transportSays bool
	}{
		{
			name:   "wrong SCRAM password",
			broker: embedded.Options{Users: []embedded.User{{Mechanism: kafka.SASLScramSHA256, Name: "partnerstream", Password: "right"}}},
			sasl:   kafka.SASLSettings{Mechanism: kafka.SASLScramSHA256, Username: "partnerstream", Password: "wrong"},
			want:   func(err error) bool { return errors.Is(err, kafkago.SASLAuthenticationFailed) },
			says:   "SASL Authentication failed",
		},
		{
			name:   "wrong PLAIN password",
			broker: embedded.Options{Users: []embedded.User{{Mechanism: kafka.SASLPlain, Name: "partnerstream", Password: "right"}}},
			sasl:   kafka.SASLSettings{Mechanism: kafka.SASLPlain, Username: "partnerstream", Password: "wrong"},
			want:   func(err error) bool { return errors.Is(err, kafkago.SASLAuthenticationFailed) },
			says:   "SASL Authentication failed",
		},
		{
			name:          "broker certificate from an untrusted CA",
			broker:        embedded.Options{TLS: brokerTLS(t, other)},
			tls:           kafka.TLSSettings{Enabled: true, CAFile: ca.file},
			want:          func(err error) bool { var u x509.UnknownAuthorityError; return errors.As(err, &u) },
			says:          "certificate signed by unknown authority",
			transportSays: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := secure(t, startBroker(t, c.broker), c.tls, c.sasl)
			ctx := testContext(t, 60*time.Second)
			timed := func(path string, saysWhy bool, f func() error) {
				t.Helper()
				start := time.Now()
				err := f()
				switch took := time.Since(start); {
				case err == nil:
					t.Errorf("%s succeeded", path)
				case saysWhy && (!c.want(err) || !strings.Contains(err.Error(), c.says)):
					t.Errorf("%s = %v, want an error saying %q", path, err, c.says)
				case took > 10*time.Second:
					t.Errorf("%s took %s to fail, want it at once", path, took)
				}
			}
			timed("Ping", true, func() error { return kafka.Ping(ctx, cfg) })
			timed("EnsureTopics", true, func() error { return kafka.EnsureTopics(ctx, cfg, kafka.TopicEvents) })
			timed("consumer group", true, func() error { return firstConsumerFailure(ctx, t, cfg) })
			timed("Produce", c.transportSays, func() error {
				p := kafka.NewProducer(cfg, kafka.TopicEvents, kafka.ProducerOptions{})
				defer p.Close()
				return kafka.FirstError(p.Produce(ctx, keyedMessages("x", 1)))
			})
			timed("Partitions", c.transportSays, func() error { _, err := kafka.Partitions(ctx, cfg, kafka.TopicEvents); return err })
		})
	}
}

// firstConsumerFailure runs a consumer until it reports its first failure.
func firstConsumerFailure(ctx context.Context, t *testing.T, cfg kafka.Config) error {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var once sync.Once
	var first error
	c, err := kafka.NewConsumer(cfg, kafka.ConsumerOptions{Group: "refused", Topic: kafka.TopicEvents, MinBytes: 1, MaxBytes: 1 << 20,
		MaxWait: 100 * time.Millisecond, Failed: func(err error) {
			if err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(cctx, func(*kafka.Session) kafka.Claim { t.Error("the consumer joined the group"); return nil }); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if first == nil {
		return errors.New("the consumer reported no failure within 20s")
	}
	return first
}

// With three brokers the topics get three replicas and min.insync.replicas 2, and an
// acks=all produce succeeds.
func TestThreeBrokersGetReplicationFactorThreeAndMinInsyncTwo(t *testing.T) {
	cfg := testConfig(startBroker(t, embedded.Options{Brokers: 3}))
	if len(cfg.Brokers) != 3 {
		t.Fatalf("the embedded cluster has brokers %v, want 3", cfg.Brokers)
	}
	cfg.ReplicationFactor = 3 // MinInsyncReplicas 0: automatic
	ctx := testContext(t, 60*time.Second)
	roundTrip(ctx, t, cfg, "replicated")

	conn, err := kafkago.DialContext(ctx, "tcp", cfg.Brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(kafka.TopicEvents)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != cfg.Partitions {
		t.Errorf("%d partitions, want %d", len(parts), cfg.Partitions)
	}
	for _, p := range parts {
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d has replicas %v, want 3", p.ID, p.Replicas)
		}
	}
	if got := topicConfig(ctx, t, cfg, kafka.TopicEvents, "min.insync.replicas"); got != "2" {
		t.Errorf("min.insync.replicas = %q, want 2", got)
	}
}

func TestMinInsyncReplicasFollowsTheReplicationFactor(t *testing.T) {
	for _, c := range []struct {
		rf, set int
		want    string
	}{{1, 0, "1"}, {3, 0, "2"}, {3, 3, "3"}, {3, 1, "1"}} {
		t.Run(fmt.Sprintf("rf %d set %d", c.rf, c.set), func(t *testing.T) {
			cfg := testConfig(startBroker(t, embedded.Options{Brokers: c.rf}))
			cfg.ReplicationFactor, cfg.MinInsyncReplicas = c.rf, c.set
			ctx := testContext(t, 30*time.Second)
			if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicClicks); err != nil {
				t.Fatal(err)
			}
			if got := topicConfig(ctx, t, cfg, kafka.TopicClicks, "min.insync.replicas"); got != c.want {
				t.Errorf("min.insync.replicas = %q, want %s", got, c.want)
			}
		})
	}
}

func topicConfig(ctx context.Context, t *testing.T, cfg kafka.Config, topic, name string) string {
	t.Helper()
	transport := &kafkago.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Transport: transport}
	resp, err := client.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{name}}}})
	if err != nil {
		t.Fatalf("describe %s: %v", topic, err)
	}
	for _, r := range resp.Resources {
		for _, e := range r.ConfigEntries {
			if e.ConfigName == name {
				return e.ConfigValue
			}
		}
	}
	return ""
}

// Bad settings are refused before anything dials, each naming its setting.
func TestNewSecurityRefusesBadSettings(t *testing.T) {
	ca := newCA(t, "kafka-ca")
	_, cert, _ := ca.issue(t, "client", x509.ExtKeyUsageClientAuth)
	notPEM := writePEM(t, "garbage", "NOTHING", []byte("x"))
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		tls     kafka.TLSSettings
		sasl    kafka.SASLSettings
		setting string
		says    string
	}{
		{"unknown mechanism", kafka.TLSSettings{}, kafka.SASLSettings{Mechanism: "GSSAPI", Username: "u", Password: "p"}, "sasl-mechanism", `"GSSAPI" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`},
		{"mechanism without a password", kafka.TLSSettings{}, kafka.SASLSettings{Mechanism: "scram-sha-512", Username: "u"}, "sasl-password", "is required with SCRAM-SHA-512"},
		{"password without a mechanism", kafka.TLSSettings{}, kafka.SASLSettings{Username: "u", Password: "p"}, "sasl-mechanism", "is required"},
		{"unreadable CA", kafka.TLSSettings{Enabled: true, CAFile: "/nonexistent/ca.crt"}, kafka.SASLSettings{}, "tls-ca-file", "no such file"},
		{"CA file without a certificate", kafka.TLSSettings{Enabled: true, CAFile: notPEM}, kafka.SASLSettings{}, "tls-ca-file", "holds no PEM certificate"},
		{"certificate without its key", kafka.TLSSettings{Enabled: true, CertFile: cert}, kafka.SASLSettings{}, "tls-key-file", "is required"},
		{"key that is not the certificate's", kafka.TLSSettings{Enabled: true, CertFile: cert, KeyFile: notPEM}, kafka.SASLSettings{}, "tls-cert-file", "load the client certificate"},
		{"CA without TLS", kafka.TLSSettings{CAFile: ca.file}, kafka.SASLSettings{}, "tls-ca-file", "TLS is off"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sec, err := kafka.NewSecurity(c.tls, c.sasl)
			var se *kafka.SettingError
			if err == nil || !errors.As(err, &se) || se.Setting != c.setting || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("NewSecurity = %v, %v; want a %s error saying %q", sec, err, c.setting, c.says)
			}
		})
	}
	sec, err := kafka.NewSecurity(kafka.TLSSettings{}, kafka.SASLSettings{Mechanism: "none"})
	if sec != nil || err != nil {
		t.Errorf("no TLS and no SASL = %v, %v; want nil, nil (plaintext)", sec, err)
	}
	sec, err = kafka.NewSecurity(kafka.TLSSettings{Enabled: true}, kafka.SASLSettings{Mechanism: "scram-sha-256", Username: "u", Password: "p"})
	if err != nil || !sec.TLS() || sec.SASL() != kafka.SASLScramSHA256 {
		t.Errorf("TLS with the system CAs and SCRAM = %+v, %v", sec, err)
	}
	if s := fmt.Sprintf("%v %+v %#v", kafka.SASLSettings{Password: "hunter2"}, kafka.SASLSettings{Password: "hunter2"}, kafka.SASLSettings{Password: "hunter2"}); strings.Contains(s, "hunter2") {
		t.Errorf("a printed password shows: %s", s)
	}
}
