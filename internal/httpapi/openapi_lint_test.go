package httpapi_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/httpapi"
)

// The rules generated clients and linters need, which openapi3's validation does not check.

// rawDoc is the assembled document as plain JSON values, for the parts kin-openapi does not
// model (x-webhooks) or resolves away (a schema's own keywords beside allOf).
func rawDoc(t *testing.T) map[string]any {
	t.Helper()
	b, err := httpapi.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

var operationID = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)

// TestEveryOperationHasAUniqueOperationIDAndDeclaredTags: generators name methods after
// operationId, so each is present, camelCase and unique; the operations of /api/v1 and
// /api/partner-api carry their family's prefix (a route added to one family never renames
// another's), and every tag used is declared.
func TestEveryOperationHasAUniqueOperationIDAndDeclaredTags(t *testing.T) {
	doc := rawDoc(t)
	declared := map[string]bool{}
	for _, tag := range doc["tags"].([]any) {
		declared[tag.(map[string]any)["name"].(string)] = true
	}
	seen := map[string]string{}
	n := 0
	for _, section := range []string{"paths", "x-webhooks"} {
		items, _ := doc[section].(map[string]any)
		if len(items) == 0 {
			t.Errorf("the document has no %s", section)
		}
		for path, item := range items {
			for method, op := range item.(map[string]any) {
				if method == "parameters" {
					continue
				}
				n++
				where := strings.ToUpper(method) + " " + path
				o := op.(map[string]any)
				id, _ := o["operationId"].(string)
				switch {
				case !operationID.MatchString(id):
					t.Errorf("%s: operationId %q is not camelCase", where, id)
				case seen[id] != "":
					t.Errorf("%s: operationId %q is also %s's", where, id, seen[id])
				case strings.HasPrefix(path, "/api/v1/") != strings.HasPrefix(id, "v1"):
					t.Errorf("%s: operationId %q: the v1 prefix is for the operations of /api/v1 only", where, id)
				case strings.HasPrefix(path, "/api/partner-api/") != strings.HasPrefix(id, "partnerApi"):
					t.Errorf("%s: operationId %q: the partnerApi prefix is for the operations of /api/partner-api only", where, id)
				}
				seen[id] = where
				tags, _ := o["tags"].([]any)
				if len(tags) == 0 {
					t.Errorf("%s has no tag", where)
				}
				for _, tag := range tags {
					if !declared[tag.(string)] {
						t.Errorf("%s: tag %q is not declared in the document's tags", where, tag)
					}
				}
			}
		}
	}
	if n < 80 {
		t.Fatalf("checked %d operations; is the document read right?", n)
	}
}

// TestEveryResponseDeclaresTheHeadersItCarries: every response declares X-Request-Id and the
// RateLimit headers, a 401 WWW-Authenticate, a 405 Allow and a 429 Retry-After (required).
func TestEveryResponseDeclaresTheHeadersItCarries(t *testing.T) {
	doc, _ := spec(t)
	byStatus := map[string][]string{"401": {"WWW-Authenticate"}, "405": {"Allow"}, "429": {"Retry-After"}}
	required := map[string]bool{"Allow": true, "Retry-After": true}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, ref := range op.Responses.Map() {
				want := append([]string{"X-Request-Id", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"}, byStatus[status]...)
				for _, h := range want {
					header := ref.Value.Headers[h]
					switch {
					case header == nil || header.Value == nil:
						t.Errorf("%s %s -> %s does not declare %s", method, path, status, h)
					case required[h] && !header.Value.Required:
						t.Errorf("%s %s -> %s: %s is always sent; declare it required", method, path, status, h)
					}
				}
			}
		}
	}
}

// TestNullableSchemasHaveAType: OpenAPI 3.0's nullable only means something beside a type;
// without one Redocly, Ajv and openapi-typescript refuse the schema.
func TestNullableSchemasHaveAType(t *testing.T) {
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if v["nullable"] == true && v["type"] == nil {
				t.Errorf("%s: nullable without a type", at)
			}
			for k, child := range v {
				walk(child, at+"/"+k)
			}
		case []any:
			for i, child := range v {
				walk(child, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(rawDoc(t), "#")
}

// TestWebhookPayloadsMatchTheEvents: a delivery body of each event type validates against
// WebhookPayload, and every field it sends is declared (receivers generate types from it).
func TestWebhookPayloadsMatchTheEvents(t *testing.T) {
	doc, _ := spec(t)
	payload := doc.Components.Schemas["WebhookPayload"]
	if payload == nil {
		t.Fatal("no WebhookPayload schema")
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	conversion := events.ConversionData{ID: "cnv_1", Type: "sale", Amount: "42.50", Status: "approved", PreviousStatus: "pending",
		Currency: "USD", CommissionID: "com_1", CommissionAmount: "4.25", ProgramID: "prg_1", AffiliateID: "cmp_a",
		AdvertiserID: "cmp_b", LinkID: "lnk_1", ClickID: "clk_1", ExternalID: "order-1", OccurredAt: at, Version: 2}
	partnership := events.PartnershipData{ID: "ptn_1", Type: "partnership", Amount: "0.00", Status: "pending", Currency: "USD",
		ProgramID: "prg_1", AffiliateID: "cmp_a", AdvertiserID: "cmp_b", CreatedAt: at}
	types := slices.Clone(events.Types)
	sort.Strings(types)
	for _, typ := range types {
		var data any = conversion
		if typ == events.PartnershipCreated {
			data = partnership
		}
		raw, _ := json.Marshal(data)
		body, err := events.WebhookBody(events.Envelope{ID: "evt_1", Type: typ, OccurredAt: at, Data: raw})
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if err := payload.Value.VisitJSON(v); err != nil {
			t.Errorf("%s: %s does not match WebhookPayload: %v", typ, body, err)
			continue
		}
		name := payload.Value.Discriminator.Mapping[typ].Ref
		event := doc.Components.Schemas[strings.TrimPrefix(name, "#/components/schemas/")]
		if event == nil {
			t.Errorf("%s: the discriminator maps it to %q, which is not a schema", typ, name)
			continue
		}
		undeclared(t, typ, v, event.Value)
	}
}

// undeclared reports the keys of v (and of its objects) that schema does not declare.
func undeclared(t *testing.T, at string, v map[string]any, schema *openapi3.Schema) {
	t.Helper()
	for k, child := range v {
		prop := schema.Properties[k]
		if prop == nil {
			t.Errorf("%s: field %q is sent but not declared", at, k)
			continue
		}
		if m, ok := child.(map[string]any); ok {
			undeclared(t, at+"."+k, m, prop.Value)
		}
	}
}
