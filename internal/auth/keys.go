package auth

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// KeyRecord is what an API key authenticates as.
type KeyRecord struct {
	KeyID       string
	CompanyID   string
	CompanyKind string
	Hash        []byte
}

// ErrUnknownKey is returned for a well-formed key that is not (or no longer) valid.
var ErrUnknownKey = errors.New("unknown or revoked API key")

// KeyStore is what key authentication needs from the identity store.
type KeyStore interface {
	// LookupKey returns the active key with this hash, or ErrUnknownKey.
	LookupKey(ctx context.Context, hash []byte) (KeyRecord, error)
	// TouchKeys records that the keys were used at the given time.
	TouchKeys(ctx context.Context, keyIDs []string, at time.Time) error
}

// RevocationChannel is the Postgres NOTIFY channel on which revoked key hashes (hex) are
// announced, so every api replica drops them from its cache at once.
const RevocationChannel = "partnerstream_api_key_revoked"

// KeyAuthenticator checks API keys. A hit in its cache costs a map lookup, which keeps key
// authentication far below the 50 µs budget; a miss costs one indexed query. Entries live at
// most CacheTTL, and revocations evict them at once through Forget (called by the revoking
// replica and by the NOTIFY listener on the others).
type KeyAuthenticator struct {
	store    KeyStore
	ttl      time.Duration
	now      func() time.Time
	log      *slog.Logger
	mu       sync.RWMutex
	cache    map[string]cachedKey // by hex hash
	touchMu  sync.Mutex
	touched  map[string]struct{}
	maxCache int
}

type cachedKey struct {
	rec     KeyRecord
	expires time.Time
}

// KeyAuthOptions tune the authenticator.
type KeyAuthOptions struct {
	CacheTTL  time.Duration // default 60 s: the bound on a revocation whose NOTIFY was lost
	CacheSize int           // default 100,000 keys
	Now       func() time.Time
	Log       *slog.Logger
}

// NewKeyAuthenticator returns an authenticator over the store.
func NewKeyAuthenticator(store KeyStore, o KeyAuthOptions) *KeyAuthenticator {
	if o.CacheTTL <= 0 {
		o.CacheTTL = time.Minute
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 100_000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &KeyAuthenticator{store: store, ttl: o.CacheTTL, now: o.Now, log: o.Log, maxCache: o.CacheSize,
		cache: map[string]cachedKey{}, touched: map[string]struct{}{}}
}

// Authenticate returns the record of a presented key: ErrMalformedKey or ErrUnknownKey when
// it is not valid.
func (a *KeyAuthenticator) Authenticate(ctx context.Context, presented string) (KeyRecord, error) {
	key, err := ParseKey(presented)
	if err != nil {
		return KeyRecord{}, err
	}
	hash := HashKey(key)
	id := hex.EncodeToString(hash)
	now := a.now()
	a.mu.RLock()
	c, ok := a.cache[id]
	a.mu.RUnlock()
	if !ok || now.After(c.expires) {
		rec, err := a.store.LookupKey(ctx, hash)
		if err != nil {
			return KeyRecord{}, err
		}
		c = cachedKey{rec: rec, expires: now.Add(a.ttl)}
		a.mu.Lock()
		if len(a.cache) >= a.maxCache {
			// Crude but bounded: start over rather than grow without limit.
			a.cache = map[string]cachedKey{}
		}
		a.cache[id] = c
		a.mu.Unlock()
	}
	// The map lookup found the entry by hash; this comparison keeps the final decision
	// constant-time whatever path produced the record.
	if subtle.ConstantTimeCompare(c.rec.Hash, hash) != 1 {
		return KeyRecord{}, ErrUnknownKey
	}
	a.touchMu.Lock()
	a.touched[c.rec.KeyID] = struct{}{}
	a.touchMu.Unlock()
	return c.rec, nil
}

// Forget evicts a key by its hash (hex); the next use looks it up again.
func (a *KeyAuthenticator) Forget(hashHex string) {
	a.mu.Lock()
	delete(a.cache, hashHex)
	a.mu.Unlock()
}

// Reset drops every cached key (after missed revocation notifications).
func (a *KeyAuthenticator) Reset() {
	a.mu.Lock()
	a.cache = map[string]cachedKey{}
	a.mu.Unlock()
}

// FlushTouches writes the last-use time of the keys used since the previous flush, so usage
// costs one UPDATE per interval rather than one per request.
func (a *KeyAuthenticator) FlushTouches(ctx context.Context) error {
	a.touchMu.Lock()
	if len(a.touched) == 0 {
		a.touchMu.Unlock()
		return nil
	}
	ids := make([]string, 0, len(a.touched))
	for id := range a.touched {
		ids = append(ids, id)
	}
	a.touched = map[string]struct{}{}
	a.touchMu.Unlock()
	return a.store.TouchKeys(ctx, ids, a.now())
}

// Run flushes last-use times every interval until ctx ends (and once more then).
func (a *KeyAuthenticator) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := a.FlushTouches(fctx); err != nil {
				a.log.Warn("api keys: last-use flush failed", "err", err)
			}
			cancel()
			return
		case <-t.C:
			if err := a.FlushTouches(ctx); err != nil {
				a.log.Warn("api keys: last-use flush failed", "err", err)
			}
		}
	}
}
