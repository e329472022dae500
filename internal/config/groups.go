package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/kafka"
)

// Common settings every long-running component takes.
type Common struct {
	LogLevel        string
	MetricsAddr     string
	ShutdownTimeout time.Duration
}

func (c *Common) Register(fs *pflag.FlagSet) {
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", ":9090", "listen address of /metrics, /healthz and /readyz")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 25*time.Second, "how long SIGTERM waits for in-flight work to drain")
}

func (c *Common) Validate() error {
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return Invalid("log-level", fmt.Errorf("%q is not one of debug, info, warn, error", c.LogLevel))
	}
	if err := hostPort(c.MetricsAddr); err != nil {
		return Invalid("metrics-addr", err)
	}
	if c.ShutdownTimeout <= 0 || c.ShutdownTimeout > 10*time.Minute {
		return Invalid("shutdown-timeout", errors.New("must be between 1ns and 10m"))
	}
	return nil
}

// Postgres is the transactional store.
type Postgres struct {
	URL string
	// Optional leaves URL unset without error (dev fills it in).
	Optional bool
}

func (p *Postgres) Register(fs *pflag.FlagSet) {
	fs.StringVar(&p.URL, "postgres-url", "", "Postgres connection URL, e.g. postgres://user:pass@host:5432/db?sslmode=require")
}

func (p *Postgres) Validate() error {
	if p.URL == "" {
		if p.Optional {
			return nil
		}
		return Missing("postgres-url")
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		// url.Parse echoes the input, password included: keep it out of the message.
		return Invalid("postgres-url", errors.New("is not a valid URL"))
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return Invalid("postgres-url", fmt.Errorf("scheme must be postgres://, not %q", u.Scheme))
	}
	if u.Host == "" {
		return Invalid("postgres-url", errors.New("has no host"))
	}
	return nil
}

// ClickHouse is the statistics store, reached over the native protocol.
type ClickHouse struct {
	Addr, Database, Username, Password string
	// Cluster names the remote_servers cluster of a replicated ClickHouse (docs/stats.md).
	Cluster  string
	Optional bool
}

func (c *ClickHouse) Register(fs *pflag.FlagSet) {
	fs.StringVar(&c.Addr, "clickhouse-addr", "", "ClickHouse native-protocol address host:port (port 9000 by default on a server)")
	fs.StringVar(&c.Database, "clickhouse-database", "partnerstream", "ClickHouse database")
	fs.StringVar(&c.Username, "clickhouse-username", "default", "ClickHouse user")
	fs.StringVar(&c.Password, "clickhouse-password", "", "ClickHouse password")
	fs.StringVar(&c.Cluster, "clickhouse-cluster", "", "ClickHouse cluster (remote_servers) of one shard whose replicas are --clickhouse-addr: tables are created ON CLUSTER with replicated engines; empty for one server")
}

func (c *ClickHouse) Validate() error {
	if c.Addr == "" {
		if c.Optional {
			return nil
		}
		return Missing("clickhouse-addr")
	}
	if err := hostPort(c.Addr); err != nil {
		return Invalid("clickhouse-addr", err)
	}
	if !identifier(c.Database) {
		return Invalid("clickhouse-database", fmt.Errorf("%q must be letters, digits and underscores", c.Database))
	}
	if c.Cluster != "" && !identifier(c.Cluster) {
		return Invalid("clickhouse-cluster", fmt.Errorf("%q must be letters, digits and underscores", c.Cluster))
	}
	return nil
}

// Kafka is the event stream.
type Kafka struct {
	Brokers           []string
	Partitions        int
	ReplicationFactor int
	MinInsyncReplicas int
	Retention         time.Duration
	Compression       string
	TLS               kafka.TLSSettings
	SASLMechanism     string
	SASLUsername      string
	SASLPassword      string
	SASLPasswordFile  string
	// Optional leaves Brokers empty without error (dev then embeds a broker).
	Optional bool
	// DevDefaults makes the replication factor 1 by default: dev's embedded broker is one
	// broker.
	DevDefaults bool
	// Security is the TLS and SASL settings read and checked, set by Validate.
	Security *kafka.Security
}

func (k *Kafka) Register(fs *pflag.FlagSet) {
	rf := 3
	if k.DevDefaults {
		rf = 1
	}
	fs.StringSliceVar(&k.Brokers, "kafka-brokers", nil, "comma-separated Kafka bootstrap brokers host:port")
	fs.IntVar(&k.Partitions, "kafka-partitions", 12, "partitions of the topics created at start: the most ingest or deliver replicas that get work (docs/helm.md, Kafka)")
	fs.IntVar(&k.ReplicationFactor, "kafka-replication-factor", rf, "replication factor of the topics created at start; 1 for a single broker")
	fs.IntVar(&k.MinInsyncReplicas, "kafka-min-insync-replicas", 0, "min.insync.replicas of the topics created at start: replicas that must hold a record before a produce succeeds (0: the replication factor minus 1, between 1 and 2)")
	fs.DurationVar(&k.Retention, "kafka-retention", 7*24*time.Hour, "retention of the topics created at start")
	fs.StringVar(&k.Compression, "kafka-compression", "none", "compression of produced record batches: none, gzip, snappy, lz4 or zstd")
	fs.BoolVar(&k.TLS.Enabled, "kafka-tls", false, "connect to the brokers over TLS")
	fs.StringVar(&k.TLS.CAFile, "kafka-tls-ca-file", "", "PEM bundle of the CAs that sign the brokers' certificates; empty trusts the system's CAs")
	fs.StringVar(&k.TLS.CertFile, "kafka-tls-cert-file", "", "client certificate (PEM) for brokers that authenticate clients by certificate; needs --kafka-tls-key-file")
	fs.StringVar(&k.TLS.KeyFile, "kafka-tls-key-file", "", "key (PEM) of --kafka-tls-cert-file")
	fs.StringVar(&k.TLS.ServerName, "kafka-tls-server-name", "", "name the brokers' certificates must carry; empty takes each broker's host")
	fs.StringVar(&k.SASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty for none")
	fs.StringVar(&k.SASLUsername, "kafka-sasl-username", "", "SASL user name")
	fs.StringVar(&k.SASLPassword, "kafka-sasl-password", "", "SASL password, from the environment only (a command line is visible to every user of the machine)")
	envOnly(fs, "kafka-sasl-password")
	fs.StringVar(&k.SASLPasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password (a mounted Secret), instead of the environment variable")
}

func (k *Kafka) Validate() error {
	if len(k.Brokers) == 0 {
		if k.Optional {
			return nil
		}
		return Missing("kafka-brokers")
	}
	for _, b := range k.Brokers {
		if err := hostPort(b); err != nil {
			return Invalid("kafka-brokers", err)
		}
	}
	if k.Partitions < 1 || k.Partitions > 1000 {
		return Invalid("kafka-partitions", errors.New("must be between 1 and 1000"))
	}
	if k.ReplicationFactor < 1 || k.ReplicationFactor > 10 {
		return Invalid("kafka-replication-factor", errors.New("must be between 1 and 10"))
	}
	if k.MinInsyncReplicas < 0 || k.MinInsyncReplicas > k.ReplicationFactor {
		return Invalid("kafka-min-insync-replicas", fmt.Errorf("must be between 0 (automatic) and --kafka-replication-factor (%d)", k.ReplicationFactor))
	}
	if k.Retention < time.Hour {
		return Invalid("kafka-retention", errors.New("must be at least 1h"))
	}
	if !slices.Contains(kafka.Compressions, k.Compression) {
		return Invalid("kafka-compression", fmt.Errorf("must be one of %s", strings.Join(kafka.Compressions, ", ")))
	}
	password := k.SASLPassword
	if k.SASLPasswordFile != "" {
		if password != "" {
			return Invalid("kafka-sasl-password-file", fmt.Errorf("and %s are both set; set one", EnvName("kafka-sasl-password")))
		}
		b, err := os.ReadFile(k.SASLPasswordFile)
		if err != nil {
			return Invalid("kafka-sasl-password-file", err)
		}
		// A Secret written with a trailing newline must not make the password wrong.
		password = strings.TrimRight(string(b), "\r\n")
	}
	sec, err := kafka.NewSecurity(k.TLS, kafka.SASLSettings{Mechanism: k.SASLMechanism, Username: k.SASLUsername, Password: kafka.Password(password)})
	if err != nil {
		var se *kafka.SettingError
		if errors.As(err, &se) {
			if se.Setting == "sasl-password" && k.SASLPasswordFile != "" {
				return Invalid("kafka-sasl-password-file", se.Err)
			}
			return Invalid("kafka-"+se.Setting, se.Err)
		}
		return Invalid("kafka-tls", err)
	}
	k.Security = sec
	return nil
}

// Config is the kafka package's configuration of these settings; clientID names the component.
func (k *Kafka) Config(clientID string) kafka.Config {
	return kafka.Config{Brokers: k.Brokers, Partitions: k.Partitions, ReplicationFactor: k.ReplicationFactor,
		MinInsyncReplicas: k.MinInsyncReplicas, Retention: k.Retention, ClientID: clientID, Compression: k.Compression,
		Security: k.Security}
}

// API is the HTTP server of the api component.
type API struct {
	Addr              string
	BaseURL           string
	RateLimitRequests int
	RateLimitWindow   time.Duration
	// PostbackLimitRequests is each postback token's budget per RateLimitWindow.
	PostbackLimitRequests int
	// ScriptLimitRequests is each publishable key's budget of tracking script clicks per
	// RateLimitWindow, and ScriptAddressLimitRequests each client address's per key.
	ScriptLimitRequests        int
	ScriptAddressLimitRequests int
	FailedAuthLimit            int
	WebhookSecretWait          time.Duration
	// AutoApprovalInterval is how often commissions whose hold days ended are approved.
	AutoApprovalInterval time.Duration
	// OperatorCompanies run the platform: their owners and admins keep every company's
	// exchange rates.
	OperatorCompanies []string
	TrustedProxies    []string
	ProxyProtocol     bool
	// Proxies is TrustedProxies parsed, set by Validate.
	Proxies clientaddr.Trusted
}

func (a *API) Register(fs *pflag.FlagSet) {
	fs.StringVar(&a.Addr, "http-addr", ":8080", "listen address of the HTTP API, dashboard and click redirects")
	fs.StringVar(&a.BaseURL, "base-url", "http://127.0.0.1:8080", "public URL of the api, used in tracking links and e-mails")
	fs.IntVar(&a.RateLimitRequests, "rate-limit-requests", 1200, "requests per API key or session per window, shared by every api replica (0 disables)")
	fs.DurationVar(&a.RateLimitWindow, "rate-limit-window", time.Minute, "window of the per-credential, per-postback-token and tracking script rate limits")
	fs.IntVar(&a.PostbackLimitRequests, "postback-rate-limit-requests", 1200, "postbacks (GET or POST /postback) per postback token per window, shared by every api replica (0 disables)")
	fs.IntVar(&a.ScriptLimitRequests, "script-rate-limit-requests", 6000, "tracking script clicks (POST /api/script/clicks) per publishable key per window, shared by every api replica (0 disables)")
	fs.IntVar(&a.ScriptAddressLimitRequests, "script-address-rate-limit-requests", 120, "tracking script clicks per client address (an IPv6 client's /64) and publishable key per window, shared by every api replica (0 disables)")
	fs.IntVar(&a.FailedAuthLimit, "failed-auth-limit", 20, "wrong API keys, session tokens, postback tokens or publishable keys one address may send per minute, counted across the api replicas, before its further wrong ones get 429 for the rest of the minute; valid credentials are always served (0 disables)")
	fs.StringSliceVar(&a.OperatorCompanies, "operator-companies", nil, "comma-separated company ids (co_...) of the platform's operator: their owners and admins keep the exchange rates of every company")
	fs.StringSliceVar(&a.TrustedProxies, "trusted-proxies", nil, "comma-separated address ranges (or addresses) of the proxies in front of the api, such as an ingress controller's pods: from them the client address is taken from X-Forwarded-For (or a PROXY protocol header); empty trusts none and the client is the connection's peer")
	fs.BoolVar(&a.ProxyProtocol, "proxy-protocol", false, "accept a PROXY protocol header (v1 or v2) from --trusted-proxies on the api's connections, for a TCP load balancer in front; a header from any other peer closes the connection")
	fs.DurationVar(&a.WebhookSecretWait, "webhook-secret-wait", 10*time.Second, "how long creating or rotating a webhook waits for the controller to publish its secret")
	fs.DurationVar(&a.AutoApprovalInterval, "auto-approval-interval", time.Minute, "how often each api replica approves the commissions whose program's hold days have ended (and no rule holds)")
}

func (a *API) Validate() error {
	if err := hostPort(a.Addr); err != nil {
		return Invalid("http-addr", err)
	}
	u, err := url.Parse(a.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Invalid("base-url", fmt.Errorf("%q must be an absolute http(s) URL", a.BaseURL))
	}
	a.BaseURL = strings.TrimRight(a.BaseURL, "/")
	if a.RateLimitRequests < 0 {
		return Invalid("rate-limit-requests", errors.New("must be 0 (off) or more"))
	}
	if a.PostbackLimitRequests < 0 {
		return Invalid("postback-rate-limit-requests", errors.New("must be 0 (off) or more"))
	}
	if a.ScriptLimitRequests < 0 {
		return Invalid("script-rate-limit-requests", errors.New("must be 0 (off) or more"))
	}
	if a.ScriptAddressLimitRequests < 0 {
		return Invalid("script-address-rate-limit-requests", errors.New("must be 0 (off) or more"))
	}
	if a.FailedAuthLimit < 0 {
		return Invalid("failed-auth-limit", errors.New("must be 0 (off) or more"))
	}
	if a.RateLimitWindow < time.Second {
		return Invalid("rate-limit-window", errors.New("must be at least 1s"))
	}
	for _, id := range a.OperatorCompanies {
		if !ids.Valid(ids.Company, id) {
			return Invalid("operator-companies", fmt.Errorf("%q is not a company id (co_...)", id))
		}
	}
	if a.AutoApprovalInterval < time.Second || a.AutoApprovalInterval > time.Hour {
		return Invalid("auto-approval-interval", errors.New("must be between 1s and 1h"))
	}
	if a.WebhookSecretWait < time.Second || a.WebhookSecretWait > time.Minute {
		return Invalid("webhook-secret-wait", errors.New("must be between 1s and 1m"))
	}
	if a.Proxies, err = clientaddr.Parse(a.TrustedProxies); err != nil {
		return Invalid("trusted-proxies", err)
	}
	if a.ProxyProtocol && a.Proxies.Empty() {
		return Invalid("proxy-protocol", errors.New("needs --trusted-proxies: only trusted peers may send a PROXY header"))
	}
	return nil
}

// Kube is how components reach the Kubernetes API (Webhook custom resources).
type Kube struct {
	Kubeconfig string
	Namespace  string
	// Optional leaves the Kubernetes API out (dev without a control plane).
	Optional bool
}

func (k *Kube) Register(fs *pflag.FlagSet) {
	fs.StringVar(&k.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&k.Namespace, "namespace", "partnerstream", "namespace of the Webhook resources and their Secrets")
}

func (k *Kube) Validate() error {
	if !dnsLabel(k.Namespace) {
		return Invalid("namespace", fmt.Errorf("%q is not a valid namespace name", k.Namespace))
	}
	return nil
}

// Controller settings of the Webhook controller.
type Controller struct {
	LeaderElect bool
}

func (c *Controller) Register(fs *pflag.FlagSet) {
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "run the controller with leader election (one active replica)")
}

func (c *Controller) Validate() error { return nil }

func hostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port", s)
	}
	if port == "" {
		return fmt.Errorf("%q has no port", s)
	}
	for _, r := range port {
		if r < '0' || r > '9' {
			return fmt.Errorf("%q has a non-numeric port", s)
		}
	}
	return nil
}

func identifier(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, r := range s {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r == '-' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// Ingest is how the ingest component batches Kafka messages into ClickHouse.
type Ingest struct {
	BatchSize     int
	BatchInterval time.Duration
	// RawRetentionMonths is how many months of raw rows ClickHouse keeps; 0 keeps them all.
	RawRetentionMonths int
}

func (i *Ingest) Register(fs *pflag.FlagSet) {
	fs.IntVar(&i.BatchSize, "ingest-batch-size", 10000, "most messages in one ClickHouse insert")
	fs.DurationVar(&i.BatchInterval, "ingest-batch-interval", time.Second, "longest a message waits before its batch is written (bounds statistics freshness)")
	fs.IntVar(&i.RawRetentionMonths, "ingest-raw-retention-months", 13, "months of raw clicks and conversion changes ClickHouse keeps before the current one (the daily rollups are kept for ever); 0 keeps them all")
}

func (i *Ingest) Validate() error {
	if i.BatchSize < 1 || i.BatchSize > 1_000_000 {
		return Invalid("ingest-batch-size", errors.New("must be between 1 and 1000000"))
	}
	if i.BatchInterval < 10*time.Millisecond || i.BatchInterval > time.Minute {
		return Invalid("ingest-batch-interval", errors.New("must be between 10ms and 1m"))
	}
	if i.RawRetentionMonths < 0 || i.RawRetentionMonths > 1200 {
		return Invalid("ingest-raw-retention-months", errors.New("must be between 0 (keep for ever) and 1200"))
	}
	return nil
}

// Enrich is what ingest derives from each click's address, user agent, referrer and
// landing URL (internal/enrich).
type Enrich struct {
	GeoIPDB     string
	ASNDB       string
	HostingASNs string
	KeepFullIP  bool
}

// DefaultGeoIPDB is where the image keeps its IP-to-country database (docs/tracking.md,
// "Where clicks come from").
const DefaultGeoIPDB = "/usr/share/partnerstream/geoip/country.mmdb"

// DefaultASNDB is where the image keeps its autonomous-system database (hack/asndb).
const DefaultASNDB = "/usr/share/partnerstream/geoip/asn.mmdb"

func (e *Enrich) Register(fs *pflag.FlagSet) {
	fs.StringVar(&e.GeoIPDB, "geoip-db", DefaultGeoIPDB, "MaxMind DB format file of countries (and regions and cities when it has them) that clicks' addresses are looked up in; the default is the image's openly licensed one (a binary outside the image without it runs without countries); empty: none")
	fs.StringVar(&e.ASNDB, "asn-db", DefaultASNDB, "MaxMind DB format file of autonomous systems (GeoLite2-ASN, DB-IP ASN Lite) for clicks' asn, as_org and hosting; the default is the image's openly licensed one (a binary outside the image without it runs without networks); empty: none")
	fs.StringVar(&e.HostingASNs, "hosting-asns", "", "file of AS numbers (one a line, # comments) of data centres, clouds and VPN providers, flagged hosting beside the shipped list")
	fs.BoolVar(&e.KeepFullIP, "keep-full-ip", false, "store clicks' addresses whole in ClickHouse instead of truncated to their /24 (IPv4) or /48 (IPv6)")
}

// Validate leaves the files to enrich.New, which opens them at start and names the one that
// is missing or corrupt.
func (e *Enrich) Validate() error { return nil }

// Deliver settings of the delivery workers (webhooks and postbacks).
type Deliver struct {
	Workers    int
	PerTarget  int
	ClaimBatch int
	Lease      time.Duration
	// RetentionDays is how long delivery history is kept; 0 keeps it for ever.
	RetentionDays int
	// DisableAfterDays is how long a target may fail without a success before it is
	// disabled; 0 never disables one.
	DisableAfterDays int
}

func (d *Deliver) Register(fs *pflag.FlagSet) {
	fs.IntVar(&d.Workers, "deliver-workers", 64, "delivery attempts in flight at once in this process")
	fs.IntVar(&d.PerTarget, "deliver-per-target", 8, "delivery attempts in flight at once to one webhook or postback URL, so a slow receiver cannot take every worker")
	fs.IntVar(&d.ClaimBatch, "deliver-claim-batch", 256, "most due deliveries one worker query claims")
	fs.DurationVar(&d.Lease, "deliver-lease", 2*time.Minute, "how long a claimed delivery stays with its worker; a dead worker's deliveries come back after it")
	fs.IntVar(&d.DisableAfterDays, "deliver-disable-after-days", 5, "days a webhook or postback URL may fail without a single success before it is disabled (its owners are e-mailed); 0 never disables one")
	fs.IntVar(&d.RetentionDays, "deliver-retention-days", 30, "days a delivery and its attempts are kept after the last change (failed ones stay replayable that long); 0 keeps them for ever")
}

func (d *Deliver) Validate() error {
	if d.Workers < 1 || d.Workers > 10_000 {
		return Invalid("deliver-workers", errors.New("must be between 1 and 10000"))
	}
	if d.PerTarget < 1 || d.PerTarget > d.Workers {
		return Invalid("deliver-per-target", fmt.Errorf("must be between 1 and --deliver-workers (%d)", d.Workers))
	}
	if d.ClaimBatch < 1 || d.ClaimBatch > 10_000 {
		return Invalid("deliver-claim-batch", errors.New("must be between 1 and 10000"))
	}
	if d.Lease <= 15*time.Second || d.Lease > time.Hour {
		return Invalid("deliver-lease", errors.New("must be longer than an attempt (15s) and at most 1h"))
	}
	if d.DisableAfterDays < 0 || d.DisableAfterDays > 365 {
		return Invalid("deliver-disable-after-days", errors.New("must be between 0 (never) and 365"))
	}
	if d.RetentionDays < 0 || d.RetentionDays > 3650 {
		return Invalid("deliver-retention-days", errors.New("must be between 0 (keep for ever) and 3650"))
	}
	return nil
}

// Egress is the SSRF guard of every request the platform makes to a URL a company chose
// (webhook and postback deliveries, the API's test send).
type Egress struct {
	// AllowCIDRs are the non-public ranges such URLs may resolve to. Set a default before
	// Register: dev allows loopback.
	AllowCIDRs []string
	// CAFile is a PEM bundle of CAs trusted beside the system's for receivers' certificates.
	CAFile string
}

func (e *Egress) Register(fs *pflag.FlagSet) {
	fs.StringSliceVar(&e.AllowCIDRs, "egress-allow-cidrs", e.AllowCIDRs, "comma-separated address ranges that webhook and postback URLs may resolve to although not public (loopback, private, link-local, CGNAT, ULA and metadata addresses are refused otherwise)")
	fs.StringVar(&e.CAFile, "egress-ca-file", "", "PEM file of extra CAs that webhook and postback receivers' certificates may be signed by (a private CA), trusted beside the system's")
}

func (e *Egress) Validate() error {
	for _, c := range e.AllowCIDRs {
		if _, err := netip.ParsePrefix(strings.TrimSpace(c)); err != nil {
			return Invalid("egress-allow-cidrs", fmt.Errorf("%q is not an address range like 10.0.0.0/8", c))
		}
	}
	return nil
}

// Tracking is how the click redirect records clicks.
type Tracking struct {
	Mode          string
	SpoolDir      string
	SpoolMaxBytes int64
	AckTimeout    time.Duration
	// ClickIDKeys sign click ids (kid:base64 ring). The api requires them; dev makes its
	// own when none are given.
	ClickIDKeys string
}

func (t *Tracking) Register(fs *pflag.FlagSet) {
	fs.StringVar(&t.Mode, "click-mode", "ack", "ack: answer a click once Kafka (or the local spool) has it; async: answer first, queue in memory")
	def := t.SpoolDir
	if def == "" {
		def = "/var/lib/partnerstream/spool"
	}
	fs.StringVar(&t.SpoolDir, "click-spool-dir", def, "directory of the click spool (clicks kept while Kafka is slow or down); one api process per directory")
	fs.Int64Var(&t.SpoolMaxBytes, "click-spool-max-bytes", 1<<30, "largest click spool; beyond it clicks are dropped and counted")
	fs.DurationVar(&t.AckTimeout, "click-ack-timeout", 50*time.Millisecond, "ack mode: how long Kafka has to acknowledge a click before it is spooled")
	fs.StringVar(&t.ClickIDKeys, "click-id-keys", "", "click-id signing keys kid:base64(>=32 bytes), comma-separated; the first signs, all verify; keep an old key for 365 days after it stopped signing (see docs/tracking.md, section Click ids). Required by the api (the chart makes one); dev keeps its own")
}

func (t *Tracking) Validate() error {
	if t.Mode != "ack" && t.Mode != "async" {
		return Invalid("click-mode", fmt.Errorf("%q is not ack or async", t.Mode))
	}
	if t.SpoolDir == "" {
		return Missing("click-spool-dir")
	}
	if t.SpoolMaxBytes < 1<<20 {
		return Invalid("click-spool-max-bytes", errors.New("must be at least 1 MiB"))
	}
	if t.AckTimeout < time.Millisecond || t.AckTimeout > 10*time.Second {
		return Invalid("click-ack-timeout", errors.New("must be between 1ms and 10s"))
	}
	return nil
}
