package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// forbidden are citations of documents kept outside the repository. They are spelled in
// pieces so this file does not cite them itself.
var forbidden = []string{"ARCHITECTURE" + ".md", ".." + "/shared"}

var (
	// docsPath is a mention of a guide anywhere, in code or prose: docs/<name>.md.
	docsPath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])((?:\.\./)*docs/[A-Za-z0-9_-]+\.md)`)
	// sourcePath is a source file named in a Markdown document, as `internal/ingest/writer.go`.
	sourcePath = regexp.MustCompile("`((?:cmd|internal|controllers|api|hack|charts)/[A-Za-z0-9_./-]+\\.(?:go|sh|yaml|sql))`")
	// mdLink is a relative Markdown link to a Markdown file, with an optional anchor.
	mdLink = regexp.MustCompile(`\]\(([^)#\s:]+\.md)(#[^)\s]*)?\)`)
	// heading is a Markdown heading.
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
)

// TestNoFileCitesADocumentItDoesNotContain reads every text file of the repository: none may
// cite a document kept outside it, every docs/<name>.md it names must exist, every source
// file a Markdown document names must exist, and every relative Markdown link must lead to
// an existing file and, with an anchor, to a heading of it.
func TestNoFileCitesADocumentItDoesNotContain(t *testing.T) {
	files := textFiles(t)
	if len(files) < 50 {
		t.Fatalf("found only %d files under %s: the walk is broken", len(files), root)
	}
	anchors := map[string]map[string]bool{}
	for _, path := range files {
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, f := range forbidden {
			if bytes.Contains(body, []byte(f)) {
				t.Errorf("%s cites %s, which is not in the repository: cite docs/architecture.md", rel, f)
			}
		}
		for _, m := range docsPath.FindAllSubmatch(body, -1) {
			target := strings.TrimLeft(string(m[1]), "./")
			if _, err := os.Stat(filepath.Join(root, target)); err != nil {
				t.Errorf("%s names %s, which does not exist", rel, m[1])
			}
		}
		if filepath.Ext(path) != ".md" {
			continue
		}
		for _, m := range sourcePath.FindAllSubmatch(body, -1) {
			if _, err := os.Stat(filepath.Join(root, string(m[1]))); err != nil {
				t.Errorf("%s names %s, which does not exist", rel, m[1])
			}
		}
		for _, m := range mdLink.FindAllSubmatch(body, -1) {
			target := filepath.Join(filepath.Dir(path), string(m[1]))
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel, m[1])
				continue
			}
			if len(m[2]) == 0 {
				continue
			}
			if anchors[target] == nil {
				anchors[target] = headingAnchors(t, target)
			}
			if anchor := string(m[2][1:]); !anchors[target][anchor] {
				t.Errorf("%s links to %s#%s, which has no such heading", rel, m[1], anchor)
			}
		}
	}
}

// textFiles lists the repository's source and documentation files, leaving out hidden
// directories (.git, .local) and build output.
func textFiles(t *testing.T) []string {
	t.Helper()
	text := map[string]bool{".go": true, ".md": true, ".yaml": true, ".yml": true, ".sh": true, ".sql": true,
		".txt": true, ".json": true, ".tpl": true, ".tmpl": true, ".html": true, ".js": true, ".css": true, ".toml": true}
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if text[filepath.Ext(name)] || name == "Makefile" || name == "Dockerfile" {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// headingAnchors returns the anchors GitHub makes of a Markdown file's headings: lower case,
// punctuation dropped, spaces as hyphens, and -1, -2 ... after repeats.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Headings inside fenced code blocks are not headings.
	var prose strings.Builder
	inFence := false
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			prose.WriteString(line)
		}
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(prose.String(), -1) {
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func slugify(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '–' && r != '—':
			b.WriteRune(r)
		}
	}
	return b.String()
}
