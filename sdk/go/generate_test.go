package partnerstream_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestSDKsAreWhatTheDocumentGenerates regenerates both SDKs from the OpenAPI document into a
// temporary directory: a change to the API that is not in the committed SDKs fails here
// (and a client that the change breaks then fails to compile or fails its journey in
// test/journey).
func TestSDKsAreWhatTheDocumentGenerates(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "hack/sdk.sh", "generate", out)
	cmd.Dir = root
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/sdk.sh generate: %v\n%s", err, log)
	}
	for _, f := range []string{"sdk/go/partnerstream.gen.go", "sdk/typescript/src/schema.gen.ts"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the OpenAPI document generates: run `make sdk` (first difference at line %d)", f, firstDifference(got, want))
		}
	}
}

func firstDifference(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
