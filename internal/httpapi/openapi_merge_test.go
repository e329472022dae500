package httpapi

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestAssemblingTheDocumentRefusesANameDefinedTwice(t *testing.T) {
	files := fstest.MapFS{
		"openapi/00-base.yaml": {Data: []byte("openapi: 3.0.3\npaths:\n  /a: {get: {responses: {'200': {description: ok}}}}\ncomponents:\n  schemas:\n    A: {type: object}\n")},
		"openapi/10-x.yaml":    {Data: []byte("paths:\n  /b: {get: {responses: {'200': {description: ok}}}}\ncomponents:\n  schemas:\n    B: {type: object}\n")},
	}
	doc, err := assembleOpenAPI(files)
	if err != nil || !strings.Contains(string(doc), `"/b"`) || !strings.Contains(string(doc), `"B"`) {
		t.Fatalf("merge of distinct names: %v %s", err, doc)
	}
	files["openapi/20-y.yaml"] = &fstest.MapFile{Data: []byte("components:\n  schemas:\n    A: {type: string}\n")}
	if _, err := assembleOpenAPI(files); err == nil || !strings.Contains(err.Error(), "20-y.yaml") {
		t.Fatalf("a schema defined twice: %v", err)
	}
}
