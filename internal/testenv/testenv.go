// Package testenv hands integration tests the real services that `make test` starts
// (hack/test-env.sh) and names through the environment. Each call gives the test a fresh,
// isolated database so tests can run in parallel and leave nothing behind.
//
// Without the variable a test is skipped on a laptop, but under CI=true a missing service is a
// failure: CI must never pass by skipping.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
)

const (
	// EnvPostgres is a superuser URL of the test Postgres server.
	EnvPostgres = "PARTNERSTREAM_TEST_POSTGRES_URL"
	// EnvClickHouse is host:port of the test ClickHouse server's native protocol.
	EnvClickHouse = "PARTNERSTREAM_TEST_CLICKHOUSE_ADDR"
	// EnvKubeAssets is the directory with kube-apiserver and etcd for envtest.
	EnvKubeAssets = "KUBEBUILDER_ASSETS"
	// EnvGeoIPDB is the image's IP-to-country database (hack/npm-tools.sh geoip).
	EnvGeoIPDB = "PARTNERSTREAM_TEST_GEOIP_DB"
	// EnvASNDB is the image's autonomous-system database (hack/npm-tools.sh asn).
	EnvASNDB = "PARTNERSTREAM_TEST_ASN_DB"
)

// Require returns the value of the environment variable, skipping the test when it is unset,
// or failing it under CI=true.
func Require(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: run the tests through `make test` (CI must not skip)", name)
		}
		t.Skipf("%s is not set: run the tests through `make test`", name)
	}
	return v
}

// Name returns a short random identifier usable as a database name.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// Postgres creates an empty database on the test server and returns its URL. The database is
// dropped when the test ends.
func Postgres(t testing.TB) string {
	t.Helper()
	return PostgresCopy(t, "")
}

// PostgresCopy is Postgres with a copy of the template database (CREATE DATABASE ... TEMPLATE)
// rather than an empty one; "" is the server's default template.
func PostgresCopy(t testing.TB, template string) string {
	t.Helper()
	admin := Require(t, EnvPostgres)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testenv: connect to test postgres: %v", err)
	}
	defer conn.Close(ctx)
	name := Name("pst")
	create := "CREATE DATABASE " + name
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("testenv: %s is not a URL: %v", EnvPostgres, err)
	}
	u.Path = "/" + name
	return u.String()
}

// ClickHouse creates an empty database on the test server and returns the server address and
// the database name. The database is dropped when the test ends.
func ClickHouse(t testing.TB) (addr, database string) {
	t.Helper()
	addr = Require(t, EnvClickHouse)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("testenv: open clickhouse: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	database = Name("pst")
	if err := conn.Exec(ctx, "CREATE DATABASE "+database); err != nil {
		t.Fatalf("testenv: create clickhouse database: %v", err)
	}
	t.Cleanup(func() {
		c, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+database)
	})
	return addr, database
}

// KubeAssets returns the envtest binary directory.
func KubeAssets(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(Require(t, EnvKubeAssets))
}

// FreeAddr is a loopback address whose port was free a moment ago, for a server under test
// to listen on (another process may take it in between; tests accept that race).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}
