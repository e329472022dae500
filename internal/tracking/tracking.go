// Package tracking is the click redirect: it resolves a tracking link's code from an
// in-memory cache kept fresh by Postgres notifications (Resolver), flags bots and repeat
// visitors (IsBot, Dedup), records the click on Kafka without ever losing one it answered
// for (Recorder, with its write-ahead spool), and says where to send the visitor
// (Service.Click). The HTTP handler in package httpapi only translates.
package tracking

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/links"
)

// Limits on what a click event carries from the request; longer values are cut (at a
// character boundary), never refused: a click is worth more than a long header.
const (
	MaxUserAgentLen = 1024 // bytes
	MaxReferrerLen  = 2048 // bytes
)

// ClickRecorder makes a click durable; *Recorder is one. The click's strings may point into
// the request's buffers: Record must copy what it keeps beyond the call.
type ClickRecorder interface {
	Record(ctx context.Context, c events.Click) error
}

// Visit is one request to /c/{code}. Its strings need to stay valid only during Click, so
// a handler can pass its request buffers without copying them.
type Visit struct {
	Code                    string
	IP, UserAgent, Referrer string
	// Subs are the query's sub1..sub5; an empty one keeps the link's default. Control
	// characters are dropped, invalid UTF-8 replaced, and values longer than 255 characters
	// cut to 255.
	Subs [5]string
	// VisitorID is the visitor cookie's value, "" without one.
	VisitorID string
}

// Redirect is the answer to a Visit.
type Redirect struct {
	Click events.Click
	// newVisitor is the new visitor id (all zero bytes without one); an array, not a string,
	// so the redirect writes its cookie without an allocation.
	newVisitor [visitorIDLen]byte
	to         *landing
}

// NewVisitorID returns the visitor id to set as the cookie when the visit had no valid one.
// The array saves the redirect an allocation; NewVisitorIDString is the same as a string.
func (r *Redirect) NewVisitorID() (id *[visitorIDLen]byte, ok bool) {
	return &r.newVisitor, r.newVisitor[0] != 0
}

// NewVisitorIDString is NewVisitorID as a string, "" without a new visitor id.
func (r *Redirect) NewVisitorIDString() string {
	if id, ok := r.NewVisitorID(); ok {
		return string(id[:])
	}
	return ""
}

// Location is the landing URL with the click id added.
func (r Redirect) Location() string { return string(r.AppendLocation(nil)) }

// AppendLocation appends Location to dst, so a handler can write it without a string.
func (r Redirect) AppendLocation(dst []byte) []byte { return r.to.appendLocation(dst, r.Click.ClickID) }

// ServiceOptions configure a Service. Zero values take the defaults.
type ServiceOptions struct {
	// DuplicateWindow is how long repeat clicks of a visitor on a link count as
	// duplicates (default 1 h).
	DuplicateWindow time.Duration
	// DuplicateMaxEntries bounds the duplicate detector's memory (default 1 000 000
	// visitor-link pairs, 32 MB of tables, allocated as they fill).
	DuplicateMaxEntries int
	// ClickIDs sign the click ids (package clickid), so a conversion is attributed from its
	// id alone. Without a key the service makes one of its own, which nothing else can verify:
	// for tests; the api passes its ring (--click-id-keys).
	ClickIDs clickid.Keys
	Now      func() time.Time
	Log      *slog.Logger
}

// Service turns visits into recorded clicks and redirects.
type Service struct {
	links    *Resolver
	recorder ClickRecorder
	dedup    *Dedup
	clickIDs clickid.Keys
	now      func() time.Time
	log      *slog.Logger
}

// NewService returns the redirect service.
func NewService(resolver *Resolver, recorder ClickRecorder, o ServiceOptions) *Service {
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = time.Hour
	}
	if o.DuplicateMaxEntries <= 0 {
		o.DuplicateMaxEntries = 1_000_000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if !o.ClickIDs.CanMint() {
		// A spec GenerateKeySpec made always parses.
		o.ClickIDs, _ = clickid.ParseKeys(clickid.GenerateKeySpec())
	}
	return &Service{links: resolver, recorder: recorder, dedup: NewDedup(o.DuplicateWindow, o.DuplicateMaxEntries),
		clickIDs: o.ClickIDs, now: o.Now, log: o.Log}
}

// Click records a visit's click and returns where to send the visitor. It fails only with
// ErrUnknownLink (unknown or inactive link: answer the not-found page) or ErrUnavailable
// (the link could not be looked up). A click the recorder had to drop is counted and
// logged, and the visitor is redirected anyway.
func (s *Service) Click(ctx context.Context, v Visit) (Redirect, error) {
	dest, err := s.links.Resolve(ctx, v.Code)
	if err != nil {
		return Redirect{}, err
	}
	now := s.now().UTC()
	// One read of the random source per click: the click id's random part and, for a visitor
	// without a valid cookie, the new visitor id.
	var random [clickid.RandomLen + visitorIDBytes]byte
	newVisitor := !validVisitorID(v.VisitorID)
	if newVisitor {
		_, _ = rand.Read(random[:]) // crypto/rand.Read never fails on supported platforms
	} else {
		_, _ = rand.Read(random[:clickid.RandomLen])
	}
	c := events.Click{
		ClickID: s.clickID(dest.LinkID, now, [clickid.RandomLen]byte(random[:])), OccurredAt: now,
		LinkID: dest.LinkID, ProgramID: dest.ProgramID, AffiliateID: dest.AffiliateID, AdvertiserID: dest.AdvertiserID,
		PromotionID: dest.PromotionID,
		IP:          v.IP, UserAgent: cut(v.UserAgent, MaxUserAgentLen), Referrer: cut(v.Referrer, MaxReferrerLen),
		IsBot: IsBot(v.UserAgent),
	}
	subs := dest.Subs
	for i, q := range v.Subs {
		// A visitor's query is not validated like a link's sub-ids: it is cleaned.
		if q = freetext.Clean(q); q != "" {
			subs[i] = cutRunes(q, links.MaxSubLen)
		}
	}
	c.Sub1, c.Sub2, c.Sub3, c.Sub4, c.Sub5 = subs[0], subs[1], subs[2], subs[3], subs[4]

	var r Redirect
	// The visitor is its cookie; without one (a first click, or a client that keeps no
	// cookies) it is its IP address and user agent, and the cookie handed out now is
	// remembered too so the next click, which carries it, is a repeat.
	if !newVisitor {
		c.IsDuplicate = s.dedup.Seen(dest.LinkID, v.VisitorID, now)
	} else {
		base64.RawURLEncoding.Encode(r.newVisitor[:], random[clickid.RandomLen:])
		c.IsDuplicate = s.dedup.SeenDevice(dest.LinkID, v.IP, v.UserAgent, now)
		s.dedup.Remember(dest.LinkID, string(r.newVisitor[:]), now)
	}
	if c.IsBot {
		clicksBot.Inc()
	}
	if c.IsDuplicate {
		clicksDuplicate.Inc()
	}

	r.to = dest.pick(now)
	c.LandingURL = r.to.plain
	if err := s.recorder.Record(ctx, c); err != nil {
		s.log.Warn("click not recorded; redirecting anyway", "click_id", c.ClickID, "link_id", c.LinkID, "err", err)
	}
	r.Click = c
	return r, nil
}

// clickID mints the signed click id. A link id the codec cannot carry would be a bug
// elsewhere (links get ids.New ids); the click still gets a (plain) id and counts.
func (s *Service) clickID(linkID string, now time.Time, random [clickid.RandomLen]byte) string {
	id, err := s.clickIDs.MintWith(linkID, now, random)
	if err != nil {
		s.log.Error("click id not signed; using a plain one", "link_id", linkID, "err", err)
		return ids.New(ids.Click)
	}
	return id
}

// Landing returns where a code sends visitors, without recording a click: the answer to a
// HEAD request, which link checkers and previews send and which must not count.
func (s *Service) Landing(ctx context.Context, code string) (string, error) {
	dest, err := s.links.Resolve(ctx, code)
	if err != nil {
		return "", err
	}
	return dest.Landing(s.now()), nil
}

// A visitor id is 16 random bytes in unpadded base64url.
const (
	visitorIDBytes = 16
	visitorIDLen   = 22
)

// validVisitorID accepts only ids this package could have made, so a forged cookie cannot
// inject arbitrary bytes and an empty one does not collapse every visitor into one.
func validVisitorID(s string) bool {
	if len(s) != visitorIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			return false
		}
	}
	return true
}

// cut shortens s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// cutRunes shortens s to at most n characters.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
