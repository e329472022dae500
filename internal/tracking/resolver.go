package tracking

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/partnerstream/partnerstream/internal/links"
)

// LinkSource looks a code up in the database; *links.Service is one. It returns
// links.ErrNotFound for an unknown code.
type LinkSource interface {
	Resolve(ctx context.Context, code string) (links.Target, error)
}

// ResolverOptions configure a Resolver. Zero values take the defaults.
type ResolverOptions struct {
	// TTL bounds how long an entry is trusted without a notification: a safety net for a
	// lost NOTIFY (default 30 s).
	TTL time.Duration
	// NegativeTTL is how long an unknown code is remembered as unknown (default 5 s), so a
	// scanner hammering random codes costs one query per code and period.
	NegativeTTL time.Duration
	// MaxStale is how long an expired entry may still be served while the database does not
	// answer (default 10 min): links keep redirecting through a database outage. Entries
	// dropped by a notification are never served stale.
	MaxStale time.Duration
	// MaxEntries bounds the cache (default 100 000 codes).
	MaxEntries int
	// LoadTimeout bounds one database lookup (default 2 s).
	LoadTimeout time.Duration
	Now         func() time.Time
}

func (o *ResolverOptions) defaults() {
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	if o.NegativeTTL <= 0 {
		o.NegativeTTL = 5 * time.Second
	}
	if o.MaxStale <= 0 {
		o.MaxStale = 10 * time.Minute
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 100_000
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Resolver answers the redirect's lookups from memory. Entries are dropped by Invalidate
// (fed by pgstore.Listen on links.ChangedChannel: a code, or "program:<id>" for all of a program's links),
// all of them by Reset (the listener reconnected and may have missed notifications), and
// otherwise expire after the TTL.
type Resolver struct {
	src LinkSource
	o   ResolverOptions

	mu        sync.RWMutex
	entries   map[string]*entry
	byProgram map[string]map[string]struct{}
	// gen counts invalidations. A lookup that started before one may have read the old
	// row, so it must not be cached: the notification it raced with is already spent.
	gen uint64

	loads singleflight.Group
}

type entry struct {
	dest    *Destination // nil: the code is unknown
	expires time.Time
	stale   time.Time // until when it may be served if a reload fails
}

// NewResolver returns a resolver over src.
func NewResolver(src LinkSource, o ResolverOptions) *Resolver {
	o.defaults()
	return &Resolver{src: src, o: o, entries: map[string]*entry{}, byProgram: map[string]map[string]struct{}{}}
}

// Errors of Resolve.
var (
	// ErrUnknownLink: no link has the code, or it does not redirect now (link paused,
	// program not active, partnership not approved).
	ErrUnknownLink = errors.New("tracking: unknown or inactive link")
	// ErrUnavailable: the database did not answer and nothing usable was cached.
	ErrUnavailable = errors.New("tracking: link lookup unavailable")
)

// Resolve returns where a code sends visitors. A Destination is shared and read-only.
func (r *Resolver) Resolve(ctx context.Context, code string) (*Destination, error) {
	if !links.ValidCode(code) {
		return nil, ErrUnknownLink
	}
	now := r.o.Now()
	r.mu.RLock()
	e := r.entries[code]
	r.mu.RUnlock()
	if e != nil && now.Before(e.expires) {
		return e.result()
	}
	v, err, _ := r.loads.Do(code, func() (any, error) { return r.load(ctx, code) })
	if err != nil {
		if e != nil && e.dest != nil && now.Before(e.stale) {
			return e.dest, nil
		}
		return nil, err
	}
	return v.(*entry).result()
}

func (e *entry) result() (*Destination, error) {
	if e.dest == nil || !e.dest.redirects {
		return nil, ErrUnknownLink
	}
	return e.dest, nil
}

func (r *Resolver) load(ctx context.Context, code string) (*entry, error) {
	r.mu.RLock()
	gen := r.gen
	r.mu.RUnlock()
	// The lookup is shared by every request waiting for this code: one of them giving up
	// must not fail the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.LoadTimeout)
	defer cancel()
	t, err := r.src.Resolve(ctx, code)
	now := r.o.Now()
	var e *entry
	switch {
	case errors.Is(err, links.ErrNotFound):
		e = &entry{expires: now.Add(r.o.NegativeTTL)}
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	default:
		e = &entry{dest: newDestination(t), expires: now.Add(r.o.TTL), stale: now.Add(r.o.MaxStale)}
	}
	r.mu.Lock()
	if r.gen == gen {
		r.store(strings.Clone(code), e)
	}
	r.mu.Unlock()
	return e, nil
}

// store keeps e under code; r.mu is held.
func (r *Resolver) store(code string, e *entry) {
	if old := r.entries[code]; old != nil {
		r.unindex(code, old)
	} else if len(r.entries) >= r.o.MaxEntries {
		// Drop an arbitrary entry (map order is random enough): a full cache is a rare,
		// scanner-driven state where any victim is as good as another.
		for victim, v := range r.entries {
			r.unindex(victim, v)
			delete(r.entries, victim)
			break
		}
	}
	r.entries[code] = e
	if e.dest != nil {
		set := r.byProgram[e.dest.ProgramID]
		if set == nil {
			set = map[string]struct{}{}
			r.byProgram[e.dest.ProgramID] = set
		}
		set[code] = struct{}{}
	}
}

func (r *Resolver) unindex(code string, e *entry) {
	if e.dest == nil {
		return
	}
	if set := r.byProgram[e.dest.ProgramID]; set != nil {
		delete(set, code)
		if len(set) == 0 {
			delete(r.byProgram, e.dest.ProgramID)
		}
	}
}

// Invalidate drops what a links.ChangedChannel payload names: one code, or with
// "program:<id>" every cached link of the program.
func (r *Resolver) Invalidate(payload string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	if program, ok := strings.CutPrefix(payload, "program:"); ok {
		for code := range r.byProgram[program] {
			delete(r.entries, code)
		}
		delete(r.byProgram, program)
		return
	}
	if e := r.entries[payload]; e != nil {
		r.unindex(payload, e)
		delete(r.entries, payload)
	}
}

// Reset drops every entry.
func (r *Resolver) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.entries = map[string]*entry{}
	r.byProgram = map[string]map[string]struct{}{}
}

// Destination is a resolved link: the ids a click carries and where it sends the visitor.
type Destination struct {
	LinkID, ProgramID, AffiliateID, AdvertiserID, PromotionID string
	Subs                                                      [5]string
	ClickParam                                                string

	redirects bool
	// promotion applies within [promoFrom, promoUntil) (zero times: unbounded); fallback is
	// the link's destination or else the program's landing page.
	promotion, fallback   landing
	hasPromotion          bool
	promoFrom, promoUntil time.Time
}

func newDestination(t links.Target) *Destination {
	d := &Destination{LinkID: t.LinkID, ProgramID: t.ProgramID, AffiliateID: t.AffiliateID, AdvertiserID: t.AdvertiserID,
		PromotionID: t.PromotionID, Subs: t.Subs, ClickParam: t.ClickParam, redirects: t.Redirects()}
	fallback := t.ProgramLandingURL
	if t.DestinationURL != "" {
		fallback = t.DestinationURL
	}
	d.fallback = newLanding(fallback, t.ClickParam)
	if t.PromotionLandingURL != "" {
		d.hasPromotion, d.promotion = true, newLanding(t.PromotionLandingURL, t.ClickParam)
		if t.PromotionStartsAt != nil {
			d.promoFrom = *t.PromotionStartsAt
		}
		if t.PromotionEndsAt != nil {
			d.promoUntil = *t.PromotionEndsAt
		}
	}
	return d
}

// Landing returns the landing URL at now without the click parameter: the promotion's page
// while it runs, otherwise the link's destination or the program's landing page.
func (d *Destination) Landing(now time.Time) string { return d.pick(now).plain }

func (d *Destination) pick(now time.Time) *landing {
	if d.hasPromotion && (d.promoFrom.IsZero() || !now.Before(d.promoFrom)) && (d.promoUntil.IsZero() || now.Before(d.promoUntil)) {
		return &d.promotion
	}
	return &d.fallback
}

// landing is a landing URL split around the click id, so a redirect is two string
// concatenations: head ends with "param=", tail is "" or "#fragment".
type landing struct{ plain, head, tail string }

// appendLocation appends the landing URL with the click id added under the program's
// parameter.
func (l *landing) appendLocation(dst []byte, clickID string) []byte {
	return append(append(append(dst, l.head...), clickID...), l.tail...)
}

// newLanding prepares raw for a click parameter. The existing query is kept byte for byte,
// except earlier values of the click parameter itself, which would make the landing page
// see two click ids.
func newLanding(raw, param string) landing {
	base, frag, hasFrag := strings.Cut(raw, "#")
	path, query, _ := strings.Cut(base, "?")
	var kept []string
	for _, kv := range strings.Split(query, "&") {
		if kv == "" {
			continue
		}
		k, _, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == param {
			continue
		}
		kept = append(kept, kv)
	}
	kept = append(kept, url.QueryEscape(param)+"=")
	l := landing{plain: raw, head: path + "?" + strings.Join(kept, "&")}
	if hasFrag {
		l.tail = "#" + frag
	}
	return l
}
