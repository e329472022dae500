package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"
)

//go:embed assets
var assetFiles embed.FS

// assets serves the embedded CSS and JavaScript under /assets/<version>/..., where version is
// a hash of all of them: the URLs change with any file, so browsers may keep them forever, and
// the modules' relative imports stay within one version.
type assets struct {
	version string
	files   fs.FS
}

func newAssets() (*assets, error) {
	sub, err := fs.Sub(assetFiles, "assets")
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	err = fs.WalkDir(sub, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: assets: %w", err)
	}
	return &assets{version: hex.EncodeToString(h.Sum(nil))[:12], files: sub}, nil
}

// url is the address of an asset, for the templates.
func (a *assets) url(name string) string { return "/assets/" + a.version + "/" + name }

func (a *assets) serve(c *fiber.Ctx) error {
	version, name, ok := strings.Cut(c.Params("*"), "/")
	name = path.Clean("/" + name)[1:]
	if !ok || name == "" {
		return fiber.ErrNotFound
	}
	b, err := fs.ReadFile(a.files, name)
	if err != nil {
		return fiber.ErrNotFound
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if strings.HasSuffix(name, ".js") {
		ctype = "text/javascript; charset=utf-8"
	}
	c.Set(fiber.HeaderContentType, ctype)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	if version == a.version {
		c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
	} else {
		// An old page asking for an old version gets today's file, not kept.
		c.Set(fiber.HeaderCacheControl, "no-cache")
	}
	return c.Send(b)
}

// favicon answers /favicon.ico with the page icon (an SVG, which browsers take from there too).
func (a *assets) favicon(c *fiber.Ctx) error {
	b, err := fs.ReadFile(a.files, "favicon.svg")
	if err != nil {
		return fmt.Errorf("dashboard: favicon: %w", err)
	}
	c.Set(fiber.HeaderContentType, "image/svg+xml")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderCacheControl, "public, max-age=86400")
	return c.Send(b)
}
