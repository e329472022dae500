package httpapi

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"sync"

	"github.com/gofiber/fiber/v2"
	"sigs.k8s.io/yaml"
)

// The OpenAPI document is assembled from openapi/*.yaml: 00-base.yaml holds the info,
// security schemes and shared components; every other file adds the paths and components of
// one area of the API (auth, programs, webhooks, ...), so areas are documented beside each
// other without one file everybody edits. A name defined twice is an error.
//
//go:embed openapi/*.yaml
var openapiFiles embed.FS

var (
	openapiOnce sync.Once
	openapiDoc  []byte
	openapiErr  error
)

// OpenAPI returns the assembled document as JSON.
func OpenAPI() ([]byte, error) {
	openapiOnce.Do(func() { openapiDoc, openapiErr = assembleOpenAPI(openapiFiles) })
	return openapiDoc, openapiErr
}

func assembleOpenAPI(files fs.FS) ([]byte, error) {
	names, err := fs.Glob(files, "openapi/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	doc := map[string]any{}
	for _, name := range names {
		raw, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		var part map[string]any
		if err := yaml.Unmarshal(raw, &part); err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", name, err)
		}
		if err := mergeInto(doc, part, name); err != nil {
			return nil, err
		}
	}
	addCommonHeaders(doc)
	return json.Marshal(doc)
}

// commonHeaders are on every response (requestID, and the rate limiter on every route with
// credentials); declaring them here keeps them off every fragment's every response.
var commonHeaders = []string{"X-Request-Id", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"}

// addCommonHeaders declares commonHeaders on every response object of the paths and of
// components.responses; a reference to a shared response gets them from its target.
func addCommonHeaders(doc map[string]any) {
	add := func(responses any) {
		m, _ := responses.(map[string]any)
		for _, r := range m {
			resp, ok := r.(map[string]any)
			if !ok || resp["$ref"] != nil {
				continue
			}
			headers, _ := resp["headers"].(map[string]any)
			if headers == nil {
				headers = map[string]any{}
				resp["headers"] = headers
			}
			for _, h := range commonHeaders {
				if _, ok := headers[h]; !ok {
					headers[h] = map[string]any{"$ref": "#/components/headers/" + h}
				}
			}
		}
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, item := range paths {
		ops, _ := item.(map[string]any)
		for method, op := range ops {
			if o, ok := op.(map[string]any); ok && method != "parameters" {
				add(o["responses"])
			}
		}
	}
	components, _ := doc["components"].(map[string]any)
	add(components["responses"])
}

// mergeInto adds src to dst: maps merge recursively down to paths and component names; any
// other collision is an error naming the file.
func mergeInto(dst, src map[string]any, file string) error {
	for k, v := range src {
		existing, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		em, eok := existing.(map[string]any)
		vm, vok := v.(map[string]any)
		if !eok || !vok || (k != "paths" && k != "components" && !isComponentSection(k)) {
			return fmt.Errorf("openapi: %s defines %q again", file, k)
		}
		if err := mergeInto(em, vm, file); err != nil {
			return err
		}
	}
	return nil
}

func isComponentSection(k string) bool {
	switch k {
	case "schemas", "responses", "parameters", "securitySchemes", "requestBodies", "headers", "examples":
		return true
	}
	return false
}

// mountOpenAPI serves the document as JSON without credentials.
func (s *Server) mountOpenAPI() {
	doc, err := OpenAPI()
	if err != nil {
		panic(err) // the embedded files are fixed at build time; every test catches this
	}
	s.app.Get("/openapi.json", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		c.Set(fiber.HeaderCacheControl, "public, max-age=300")
		return c.Send(doc)
	})
}
