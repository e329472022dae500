// Package chart holds the tests of the Helm chart in this directory and the generator of its
// values tables: the chart's README lists every documented value of values.yaml, the
// project README the ones marked @readme. `make helm-docs` rewrites both; a test fails when
// either is stale. (.helmignore keeps the Go files out of the packaged chart.)
package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Value is one documented entry of values.yaml.
type Value struct {
	Path    string // dotted: api.ingress.enabled
	Default string // JSON of the default value
	Doc     string
	// README marks the values the project README lists (a doc starting with "@readme").
	README bool
}

// docMarker starts the comment that documents the value below it.
const docMarker = "-- "

// Values lists the documented values of a values.yaml in file order. A value is documented
// by a comment starting with "-- " right above it; a documented map or list is one entry,
// an undocumented map is walked into, and an undocumented scalar or list is an error, so a
// new value cannot miss the tables.
func Values(valuesYAML []byte) ([]Value, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values.yaml: not a mapping")
	}
	var out []Value
	err := walk(doc.Content[0], "", &out)
	return out, err
}

func walk(m *yaml.Node, prefix string, out *[]Value) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		doc, ok := docComment(key.HeadComment)
		if !ok {
			if val.Kind == yaml.MappingNode && len(val.Content) > 0 {
				if err := walk(val, path+".", out); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("values.yaml: %s has no %q comment", path, "# "+docMarker)
		}
		var v any
		if err := val.Decode(&v); err != nil {
			return fmt.Errorf("values.yaml: %s: %w", path, err)
		}
		var def bytes.Buffer
		enc := json.NewEncoder(&def)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("values.yaml: %s: %w", path, err)
		}
		readme := strings.HasPrefix(doc, "@readme ")
		*out = append(*out, Value{Path: path, Default: strings.TrimSpace(def.String()), Doc: strings.TrimPrefix(doc, "@readme "), README: readme})
	}
	return nil
}

// docComment is the text of the last "# -- " paragraph of a head comment, joined into one
// line; earlier lines (section comments) are not part of it.
func docComment(head string) (string, bool) {
	lines := strings.Split(head, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimPrefix(l, "#"), " "+docMarker) {
			start = i
		}
	}
	if start < 0 {
		return "", false
	}
	var parts []string
	for _, l := range lines[start:] {
		parts = append(parts, strings.TrimSpace(strings.TrimPrefix(l, "#")))
	}
	return strings.TrimPrefix(strings.Join(parts, " "), docMarker), true
}

// Table renders values as a Markdown table; only the README ones when readmeOnly.
func Table(values []Value, readmeOnly bool) string {
	var b strings.Builder
	b.WriteString("| value | default | meaning |\n|---|---|---|\n")
	for _, v := range values {
		if readmeOnly && !v.README {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", v.Path, cell(v.Default), cell(v.Doc))
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Markers delimit the generated table in a Markdown file.
const (
	BeginMarker = "<!-- helm-values:begin -->"
	EndMarker   = "<!-- helm-values:end -->"
)

// ReplaceTable puts table between the markers of a Markdown document.
func ReplaceTable(md []byte, table string) ([]byte, error) {
	begin := bytes.Index(md, []byte(BeginMarker))
	end := bytes.Index(md, []byte(EndMarker))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("no %s ... %s markers", BeginMarker, EndMarker)
	}
	var b bytes.Buffer
	b.Write(md[:begin+len(BeginMarker)])
	b.WriteString("\n")
	b.WriteString(table)
	b.Write(md[end:])
	return b.Bytes(), nil
}
