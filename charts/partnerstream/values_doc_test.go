package chart

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated values tables (make helm-docs)")

// TestValuesTablesAreCurrent: the chart README lists every value of values.yaml, the project
// README the @readme ones; both are generated from values.yaml comments. With -update (make
// helm-docs) it rewrites them instead.
func TestValuesTablesAreCurrent(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values, err := Values(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []struct {
		path       string
		readmeOnly bool
	}{
		{filepath.Join(chartDir, "README.md"), false},
		{filepath.Join(repoRoot, "README.md"), true},
	} {
		md, err := os.ReadFile(doc.path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ReplaceTable(md, Table(values, doc.readmeOnly))
		if err != nil {
			t.Fatalf("%s: %v", doc.path, err)
		}
		if string(want) == string(md) {
			continue
		}
		if *update {
			if err := os.WriteFile(doc.path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("the values table of %s is stale: run `make helm-docs`", doc.path)
	}
}

func TestValuesNeedADocComment(t *testing.T) {
	for _, tc := range []struct{ name, yaml, wantErr string }{
		{"a documented value", "# -- the port\nport: 1\n", ""},
		{"a section walks into its documented values", "# section\napi:\n  # -- @readme replicas\n  replicas: 2\n", ""},
		{"an undocumented value", "api:\n  replicas: 2\n", "api.replicas has no"},
		{"a plain comment is no documentation", "# the port\nport: 1\n", "port has no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values, err := Values([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(values) != 1 {
				t.Fatalf("values %+v, error %v", values, err)
			}
			if strings.HasPrefix(tc.yaml, "# section") && (values[0].Path != "api.replicas" || !values[0].README || values[0].Doc != "replicas") {
				t.Errorf("got %+v", values[0])
			}
		})
	}
}
