// Command openapi prints the OpenAPI document the api serves at /openapi.json (the assembled
// fragments of internal/httpapi/openapi), for the linters of `make lint`.
//
//	go run ./hack/openapi > openapi.json
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/partnerstream/partnerstream/internal/httpapi"
)

func main() {
	doc, err := httpapi.OpenAPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
	// Indented, so that the linters' line numbers point somewhere.
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
	out.WriteByte('\n')
	if _, err := out.WriteTo(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
}
