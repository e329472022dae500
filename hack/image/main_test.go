package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func TestTheSameBinaryGivesTheSameImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "partnerstream")
	if err := os.WriteFile(bin, []byte("#!/not/really/a/binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := options{binary: bin, name: "ghcr.io/partnerstream/partnerstream:v9", entrypoint: "/usr/local/bin/partnerstream",
		cmd: []string{"--help"}, user: "65532:65532", version: "v9", revision: "abc", created: time.Unix(1700000000, 0).UTC(),
		ports: []string{"8080/tcp"}}
	db := filepath.Join(dir, "country.mmdb")
	if err := os.WriteFile(db, []byte("a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.adds = map[string]string{"/usr/share/partnerstream/geoip/country.mmdb": db}
	var digests []string
	for i := range 2 {
		o.out = filepath.Join(dir, "image.tar")
		d, err := build(o)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
		if i == 0 {
			time.Sleep(1100 * time.Millisecond) // a build that read the clock would differ now
		}
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds of the same binary: %s and %s", digests[0], digests[1])
	}

	// What the tarball holds: an OCI layout whose image runs as the non-root user.
	unpacked := filepath.Join(dir, "layout")
	untar(t, o.out, unpacked)
	idx, err := layout.ImageIndexFromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest.String() != digests[0] ||
		m.Manifests[0].Annotations["io.containerd.image.name"] != o.name {
		t.Fatalf("index %+v, want the image named %s", m.Manifests, o.name)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Config; c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != o.entrypoint ||
		c.Labels["org.opencontainers.image.version"] != "v9" || c.Labels["org.opencontainers.image.revision"] != "abc" {
		t.Errorf("config %+v: want user 65532, entrypoint %s and the version labels", c, o.entrypoint)
	}

	// The data file is in the layer, readable by the user the image runs as.
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no usr/share/partnerstream/geoip/country.mmdb in the layer: %v", err)
		}
		if h.Name == "usr/share/partnerstream/geoip/country.mmdb" {
			data, _ := io.ReadAll(tr)
			if string(data) != "a database" || h.Mode&0o004 == 0 {
				t.Errorf("country.mmdb holds %q, mode %o", data, h.Mode)
			}
			break
		}
	}
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
