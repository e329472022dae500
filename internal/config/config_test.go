package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func load(t *testing.T, env map[string]string, args []string, groups ...Group) error {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	return Load(pflag.NewFlagSet("test", pflag.ContinueOnError), args, groups...)
}

func TestLoadNamesTheSettingThatIsWrong(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		groups  func() []Group
		wantErr string
	}{
		{
			name:    "a missing Postgres URL names the flag and the variable",
			groups:  func() []Group { return []Group{&Postgres{}} },
			wantErr: "setting --postgres-url (PARTNERSTREAM_POSTGRES_URL): is required",
		},
		{
			name:    "a Postgres URL with another scheme is refused",
			env:     map[string]string{"PARTNERSTREAM_POSTGRES_URL": "mysql://u:p@h/db"},
			groups:  func() []Group { return []Group{&Postgres{}} },
			wantErr: "PARTNERSTREAM_POSTGRES_URL): scheme must be postgres://",
		},
		{
			name:    "a bad duration from the environment names the variable",
			env:     map[string]string{"PARTNERSTREAM_SHUTDOWN_TIMEOUT": "soon"},
			groups:  func() []Group { return []Group{&Common{}} },
			wantErr: "setting --shutdown-timeout (PARTNERSTREAM_SHUTDOWN_TIMEOUT)",
		},
		{
			name:    "a negative budget of script clicks per address names its variable",
			env:     map[string]string{"PARTNERSTREAM_SCRIPT_ADDRESS_RATE_LIMIT_REQUESTS": "-1"},
			groups:  func() []Group { return []Group{&API{}} },
			wantErr: "setting --script-address-rate-limit-requests (PARTNERSTREAM_SCRIPT_ADDRESS_RATE_LIMIT_REQUESTS): must be 0 (off) or more",
		},
		{
			name:    "a broker without a port is refused",
			args:    []string{"--kafka-brokers", "localhost"},
			groups:  func() []Group { return []Group{&Kafka{}} },
			wantErr: "setting --kafka-brokers (PARTNERSTREAM_KAFKA_BROKERS): \"localhost\" is not host:port",
		},
		{
			name:    "an unknown SASL mechanism names the flag and the ones there are",
			args:    []string{"--kafka-brokers", "k:9092", "--kafka-sasl-mechanism", "GSSAPI", "--kafka-sasl-username", "u"},
			groups:  func() []Group { return []Group{&Kafka{}} },
			wantErr: `setting --kafka-sasl-mechanism (PARTNERSTREAM_KAFKA_SASL_MECHANISM): "GSSAPI" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`,
		},
		{
			name:    "an unreadable CA bundle names the flag and the file",
			args:    []string{"--kafka-brokers", "k:9092", "--kafka-tls", "--kafka-tls-ca-file", "/nonexistent/ca.crt"},
			groups:  func() []Group { return []Group{&Kafka{}} },
			wantErr: "setting --kafka-tls-ca-file (PARTNERSTREAM_KAFKA_TLS_CA_FILE): read the CA bundle: open /nonexistent/ca.crt: no such file or directory",
		},
		{
			name:    "a SASL password on the command line is refused",
			args:    []string{"--kafka-brokers", "k:9092", "--kafka-sasl-password", "hunter2"},
			groups:  func() []Group { return []Group{&Kafka{}} },
			wantErr: "setting --kafka-sasl-password (PARTNERSTREAM_KAFKA_SASL_PASSWORD): is read from PARTNERSTREAM_KAFKA_SASL_PASSWORD only",
		},
		{
			name:    "SCRAM without a password names the password",
			args:    []string{"--kafka-brokers", "k:9092", "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", "u"},
			groups:  func() []Group { return []Group{&Kafka{}} },
			wantErr: "setting --kafka-sasl-password (PARTNERSTREAM_KAFKA_SASL_PASSWORD): is required with SCRAM-SHA-512",
		},
		{
			name:    "min.insync.replicas above the replication factor is refused",
			args:    []string{"--kafka-brokers", "k:9092", "--kafka-min-insync-replicas", "4"},
			groups:  func() []Group { return []Group{&Kafka{}} },
			wantErr: "setting --kafka-min-insync-replicas (PARTNERSTREAM_KAFKA_MIN_INSYNC_REPLICAS): must be between 0 (automatic) and --kafka-replication-factor (3)",
		},
		{
			name:    "an unknown log level is refused",
			args:    []string{"--log-level", "loud"},
			groups:  func() []Group { return []Group{&Common{}} },
			wantErr: "--log-level",
		},
		{
			name:    "a ClickHouse database with a dash is refused",
			args:    []string{"--clickhouse-addr", "127.0.0.1:9000", "--clickhouse-database", "a-b"},
			groups:  func() []Group { return []Group{&ClickHouse{}} },
			wantErr: "--clickhouse-database",
		},
		{
			name:    "a ClickHouse cluster that is not an identifier is refused",
			env:     map[string]string{"PARTNERSTREAM_CLICKHOUSE_CLUSTER": "my cluster"},
			args:    []string{"--clickhouse-addr", "127.0.0.1:9000"},
			groups:  func() []Group { return []Group{&ClickHouse{}} },
			wantErr: "setting --clickhouse-cluster (PARTNERSTREAM_CLICKHOUSE_CLUSTER)",
		},
		{
			name:    "a trusted proxy range with host bits names the entry and the range meant",
			env:     map[string]string{"PARTNERSTREAM_TRUSTED_PROXIES": "10.0.0.0/8,192.168.1.7/16"},
			groups:  func() []Group { return []Group{&API{}} },
			wantErr: `setting --trusted-proxies (PARTNERSTREAM_TRUSTED_PROXIES): trusted proxy "192.168.1.7/16": has bits set past the prefix length; the range is 192.168.0.0/16`,
		},
		{
			name:    "the PROXY protocol without trusted proxies is refused",
			args:    []string{"--proxy-protocol"},
			groups:  func() []Group { return []Group{&API{}} },
			wantErr: "setting --proxy-protocol (PARTNERSTREAM_PROXY_PROTOCOL): needs --trusted-proxies",
		},
		{
			name:   "trusted proxies and the PROXY protocol come from the environment",
			env:    map[string]string{"PARTNERSTREAM_TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::/32", "PARTNERSTREAM_PROXY_PROTOCOL": "true"},
			groups: func() []Group { return []Group{&API{}} },
		},
		{
			name: "optional stores may stay empty",
			groups: func() []Group {
				return []Group{&Postgres{Optional: true}, &Kafka{Optional: true}, &ClickHouse{Optional: true}}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := load(t, c.env, c.args, c.groups()...)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, c.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestAFlagWinsOverTheEnvironment(t *testing.T) {
	var c Common
	err := load(t, map[string]string{"PARTNERSTREAM_SHUTDOWN_TIMEOUT": "3s", "PARTNERSTREAM_LOG_LEVEL": "debug"},
		[]string{"--shutdown-timeout", "7s"}, &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.ShutdownTimeout != 7*time.Second {
		t.Fatalf("shutdown timeout = %v, want the flag's 7s", c.ShutdownTimeout)
	}
	if c.LogLevel != "debug" {
		t.Fatalf("log level = %q, want the environment's debug", c.LogLevel)
	}
}

func TestTrustedProxiesAreParsed(t *testing.T) {
	var a API
	if err := load(t, nil, []string{"--trusted-proxies", "10.0.0.0/8,192.0.2.7"}, &a); err != nil {
		t.Fatal(err)
	}
	if got := a.Proxies.String(); got != "10.0.0.0/8,192.0.2.7/32" {
		t.Errorf("trusted proxies %s", got)
	}
	if err := load(t, nil, nil, &API{}); err != nil {
		t.Errorf("no trusted proxies (the default) is refused: %v", err)
	}
}

func TestAPostgresPasswordNeverAppearsInAnError(t *testing.T) {
	err := load(t, map[string]string{"PARTNERSTREAM_POSTGRES_URL": "postgres://u:s3cret@%zz/db"}, nil, &Postgres{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error = %v: want an error without the password", err)
	}
}

func TestKafkaSecurityFromTheEnvironmentOrAFile(t *testing.T) {
	var k Kafka
	env := map[string]string{"PARTNERSTREAM_KAFKA_BROKERS": "k:9092", "PARTNERSTREAM_KAFKA_SASL_MECHANISM": "scram-sha-256",
		"PARTNERSTREAM_KAFKA_SASL_USERNAME": "ps", "PARTNERSTREAM_KAFKA_SASL_PASSWORD": "hunter2", "PARTNERSTREAM_KAFKA_TLS": "true"}
	if err := load(t, env, nil, &k); err != nil {
		t.Fatal(err)
	}
	if cfg := k.Config("api"); !cfg.Security.TLS() || cfg.Security.SASL() != "SCRAM-SHA-256" || cfg.ReplicationFactor != 3 || cfg.Partitions != 12 {
		t.Errorf("config = %+v, want TLS, SCRAM-SHA-256, replication factor 3 and 12 partitions", cfg)
	}

	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k = Kafka{}
	if err := load(t, nil, []string{"--kafka-brokers", "k:9092", "--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "ps",
		"--kafka-sasl-password-file", file}, &k); err == nil || !strings.Contains(err.Error(), "--kafka-sasl-password-file") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a password file and the password variable both set = %v, want a refusal naming the file's flag, without the password", err)
	}
	t.Setenv("PARTNERSTREAM_KAFKA_SASL_PASSWORD", "")
	k = Kafka{}
	if err := load(t, nil, []string{"--kafka-brokers", "k:9092", "--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "ps",
		"--kafka-sasl-password-file", file}, &k); err != nil || k.Security.SASL() != "PLAIN" {
		t.Errorf("the password from a file = %v, %+v", err, k.Security)
	}

	for name := range env {
		t.Setenv(name, "")
	}
	t.Setenv("PARTNERSTREAM_KAFKA_TLS", "false")
	dev := Kafka{Optional: true, DevDefaults: true}
	if err := load(t, nil, []string{"--kafka-brokers", "k:9092"}, &dev); err != nil || dev.ReplicationFactor != 1 {
		t.Errorf("dev's replication factor = %d (%v), want 1: its embedded broker is one broker", dev.ReplicationFactor, err)
	}
}

func TestMarkdownListsEveryFlagWithItsVariable(t *testing.T) {
	a := pflag.NewFlagSet("api", pflag.ContinueOnError)
	(&Postgres{}).Register(a)
	(&Common{}).Register(a)
	m := pflag.NewFlagSet("migrate", pflag.ContinueOnError)
	(&Postgres{}).Register(m)
	md := Markdown(Docs(map[string]*pflag.FlagSet{"api": a, "migrate": m}))
	for _, want := range []string{"`--postgres-url` | `PARTNERSTREAM_POSTGRES_URL` |   | api, migrate |", "`PARTNERSTREAM_LOG_LEVEL` | `info` | api |"} {
		if !strings.Contains(md, want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md)
		}
	}
}
