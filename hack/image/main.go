// Command image writes a container image as an OCI image-layout tarball without a container
// engine: one layer with a static binary, a passwd entry for the user it runs as, the
// host's CA bundle and the data files given with --add (the IP-to-country database), on an
// empty base. It gives `make image` what the Dockerfile gives `docker
// build` (non-root user 65532, entrypoint, version labels) on machines with no Docker, and
// the local cluster its pause image.
//
//	go run ./hack/image --binary bin/partnerstream --name ghcr.io/partnerstream/partnerstream:v1 \
//	    --out bin/image.tar --version v1 --revision abc123 --created 1700000000 \
//	    --add country.mmdb=/usr/share/partnerstream/geoip/country.mmdb
//
// The image is reproducible: every timestamp comes from --created (the commit time), file
// modes and owners are fixed, and gzip writes no time of its own, so the same binary gives
// the same digest. The tarball imports with `ctr -n k8s.io images import` (the name is in the
// index's io.containerd.image.name annotation) and with `docker load` tooling that reads OCI
// layouts. One line goes to stdout: the image name and its manifest digest.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type options struct {
	binary, name, out, entrypoint, user, caBundle, version, revision string
	cmd                                                              []string
	created                                                          time.Time
	ports                                                            []string
	// adds are data files: their path on this machine and in the image.
	adds map[string]string
}

func main() {
	var o options
	var cmd, ports string
	var created int64
	flag.StringVar(&o.binary, "binary", "", "the static binary to put in the image (required)")
	flag.StringVar(&o.name, "name", "", "image reference, e.g. ghcr.io/partnerstream/partnerstream:v1 (required)")
	flag.StringVar(&o.out, "out", "", "where to write the OCI image-layout tarball (required)")
	flag.StringVar(&o.entrypoint, "entrypoint", "/usr/local/bin/partnerstream", "path of the binary inside the image; also the entrypoint")
	flag.StringVar(&cmd, "cmd", "--help", "default arguments, space-separated (empty: none)")
	flag.StringVar(&o.user, "user", "65532:65532", "uid:gid the image runs as")
	flag.StringVar(&o.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied to the same path in the image (empty or missing: none)")
	flag.StringVar(&ports, "ports", "8080/tcp,9090/tcp", "exposed ports, comma-separated")
	flag.StringVar(&o.version, "version", "dev", "version label")
	flag.StringVar(&o.revision, "revision", "unknown", "revision label")
	flag.Int64Var(&created, "created", 0, "creation time in Unix seconds (the commit time, for a reproducible image)")
	o.adds = map[string]string{}
	flag.Func("add", "a data file for the image, SRC=/path/in/image, readable by everyone (repeatable)", func(v string) error {
		src, dst, ok := strings.Cut(v, "=")
		if !ok || src == "" || !strings.HasPrefix(dst, "/") {
			return fmt.Errorf("%q is not SRC=/path/in/image", v)
		}
		o.adds[dst] = src
		return nil
	})
	flag.Parse()
	if o.binary == "" || o.name == "" || o.out == "" {
		fmt.Fprintln(os.Stderr, "image: --binary, --name and --out are required")
		os.Exit(2)
	}
	o.cmd = strings.Fields(cmd)
	o.ports = strings.FieldsFunc(ports, func(r rune) bool { return r == ',' })
	o.created = time.Unix(created, 0).UTC()

	digest, err := build(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("image: %s %s\n", o.name, digest)
}

// build writes the tarball and returns the image's manifest digest.
func build(o options) (v1.Hash, error) {
	layerTar, err := rootfs(o)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.created}, CreatedBy: "hack/image: " + filepath.Base(o.binary)}})
	if err != nil {
		return v1.Hash{}, fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: o.created}
	cfg.Config.User = o.user
	cfg.Config.Entrypoint = []string{o.entrypoint}
	cfg.Config.Cmd = o.cmd
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.ExposedPorts = map[string]struct{}{}
	for _, p := range o.ports {
		cfg.Config.ExposedPorts[p] = struct{}{}
	}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "partnerstream",
		"org.opencontainers.image.source":   "https://github.com/partnerstream/partnerstream",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.created":  o.created.Format(time.RFC3339),
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return v1.Hash{}, fmt.Errorf("config: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}

	dir, err := os.MkdirTemp(filepath.Dir(o.out), ".image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("oci layout: %w", err)
	}
	// containerd names an imported image after io.containerd.image.name; other tools read the
	// OCI ref name (the tag).
	tag := o.name[strings.LastIndex(o.name, ":")+1:]
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          o.name,
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return v1.Hash{}, fmt.Errorf("oci layout: %w", err)
	}
	if err := tarDir(dir, o.out, o.created); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// rootfs is the image's only layer: the binary, the user it runs as, the CA bundle and a
// world-writable /tmp, every entry with the same time and owner root.
func rootfs(o options) ([]byte, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	uid, gid, err := ids(o.user)
	if err != nil {
		return nil, err
	}
	files := map[string]file{
		strings.TrimPrefix(o.entrypoint, "/"): {mode: 0o755, data: bin},
		"etc/passwd":                          {mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid)},
		"etc/group":                           {mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", gid)},
		"tmp/":                                {mode: 0o1777 | fs.ModeDir},
		"home/nonroot/":                       {mode: 0o700 | fs.ModeDir, uid: uid, gid: gid},
	}
	if o.caBundle != "" {
		ca, err := os.ReadFile(o.caBundle)
		switch {
		case err == nil:
			files[strings.TrimPrefix(o.caBundle, "/")] = file{mode: 0o644, data: ca}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("ca bundle: %w", err)
		}
	}
	for dst, src := range o.adds {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("--add %s: %w", dst, err)
		}
		files[strings.TrimPrefix(dst, "/")] = file{mode: 0o644, data: data}
	}
	// Parent directories first, each once, in a fixed order.
	for _, name := range slices.Collect(maps.Keys(files)) {
		for d := filepath.Dir(strings.TrimSuffix(name, "/")); d != "."; d = filepath.Dir(d) {
			if _, ok := files[d+"/"]; !ok {
				files[d+"/"] = file{mode: 0o755 | fs.ModeDir}
			}
		}
	}
	names := slices.Sorted(maps.Keys(files))

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		f := files[name]
		h := &tar.Header{Name: name, Mode: int64(f.mode.Perm()), ModTime: o.created, Uid: f.uid, Gid: f.gid, Format: tar.FormatPAX}
		if f.mode&0o1000 != 0 {
			h.Mode |= 0o1000 // the sticky bit of /tmp
		}
		if f.mode.IsDir() {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type file struct {
	mode     fs.FileMode
	uid, gid int
	data     []byte
}

func ids(user string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(user, ":")
	if !ok {
		g = u
	}
	if uid, err = strconv.Atoi(u); err == nil {
		gid, err = strconv.Atoi(g)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("--user %q: want uid:gid as numbers", user)
	}
	return uid, gid, nil
}

// tarDir packs the OCI layout directory into out, entries sorted and timed at created.
func tarDir(dir, out string, created time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		names = append(names, path)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, path := range names {
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: created, Mode: 0o644, Format: tar.FormatPAX}
		if info.IsDir() {
			h.Name, h.Typeflag, h.Mode = h.Name+"/", tar.TypeDir, 0o755
		} else {
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.IsDir() {
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
