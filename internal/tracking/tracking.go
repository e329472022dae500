// Package tracking is the click redirect: it resolves a tracking link's code from an
// in-memory cache kept fresh by Postgres notifications (Resolver), flags bots (IsBot), says
// who the visitor is (a keyed hash every replica agrees on; ingest decides from it which
// clicks are unique), records the click on Kafka without ever losing one it answered
// for (Recorder, with its write-ahead spool), and says where to send the visitor
// (Service.Click). The HTTP handler in package httpapi only translates.
package tracking

import (
	"context"
	"crypto/rand"
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
	// Landing is the page a tracking-script click was made on (ScriptClick); the redirect
	// sets its own.
	Landing string
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
	// ClickIDs sign the click ids (package clickid), so a conversion is attributed from its
	// id alone. Without a key the service makes one of its own, which nothing else can verify:
	// for tests; the api passes its ring (--click-id-keys). The ring also keys the visitor
	// hashes (clickid.Keys.VisitorKey), so every replica must have the same.
	ClickIDs clickid.Keys
	Now      func() time.Time
	Log      *slog.Logger
}

// Service turns visits into recorded clicks and redirects.
type Service struct {
	links    *Resolver
	recorder ClickRecorder
	visitors *visitors
	clickIDs clickid.Keys
	now      func() time.Time
	log      *slog.Logger
}

// NewService returns the redirect service.
func NewService(resolver *Resolver, recorder ClickRecorder, o ServiceOptions) *Service {
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
	return &Service{links: resolver, recorder: recorder, visitors: newVisitors(o.ClickIDs.VisitorKey()),
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
	r := Redirect{to: dest.pick(now)}
	v.Landing = r.to.plain
	r.newVisitor = s.record(ctx, dest, &v, now, &r.Click)
	return r, nil
}

// ScriptClick records the click of a visit the tracking script reported from a page of the
// program's own site (docs/integrations.md): the same click as a redirect's (signed id,
// visitor, bots, the Kafka path), whose landing URL is the page's (v.Landing). A code that is
// not one of programID's links is ErrUnknownLink. newVisitor is the visitor id for the
// page to keep, "" when the visit had a valid one.
func (s *Service) ScriptClick(ctx context.Context, programID string, v Visit) (c events.Click, newVisitor string, err error) {
	dest, err := s.links.Resolve(ctx, v.Code)
	if err != nil {
		return events.Click{}, "", err
	}
	if dest.ProgramID != programID {
		return events.Click{}, "", ErrUnknownLink
	}
	v.Landing = cut(v.Landing, MaxReferrerLen)
	id := s.record(ctx, dest, &v, s.now().UTC(), &c)
	if id[0] != 0 {
		newVisitor = string(id[:])
	}
	return c, newVisitor, nil
}

// record makes the click of a visit to dest into c and hands it to the recorder; it returns
// the new visitor id (all zero bytes when the visit had a valid one). The visit and the click
// go by pointer: both are large, and this is the redirect's path.
func (s *Service) record(ctx context.Context, dest *Destination, v *Visit, now time.Time, c *events.Click) [visitorIDLen]byte {
	var random [clickid.RandomLen]byte
	_, _ = rand.Read(random[:]) // crypto/rand.Read never fails on supported platforms
	*c = events.Click{
		ClickID: s.clickID(dest.LinkID, now, random), OccurredAt: now,
		LinkID: dest.LinkID, ProgramID: dest.ProgramID, AffiliateID: dest.AffiliateID, AdvertiserID: dest.AdvertiserID,
		PromotionID: dest.PromotionID,
		IP:          v.IP, UserAgent: cut(v.UserAgent, MaxUserAgentLen), Referrer: cut(v.Referrer, MaxReferrerLen),
		IsBot: IsBot(v.UserAgent), LandingURL: v.Landing,
	}
	subs := dest.Subs
	for i, q := range v.Subs {
		// A visitor's query is not validated like a link's sub-ids: it is cleaned.
		if q = freetext.Clean(q); q != "" {
			subs[i] = cutRunes(q, links.MaxSubLen)
		}
	}
	c.Sub1, c.Sub2, c.Sub3, c.Sub4, c.Sub5 = subs[0], subs[1], subs[2], subs[3], subs[4]

	// The visitor is its cookie, or the cookie its address, user agent and hour make
	// (visitors), handed out now.
	var cookie, newVisitor [visitorIDLen]byte
	if validVisitorID(v.VisitorID) {
		copy(cookie[:], v.VisitorID)
	} else {
		cookie = s.visitors.cookie(v.IP, c.UserAgent, now.Unix()/3600)
		newVisitor = cookie
	}
	c.Visitor = s.visitors.id(&cookie)
	if c.IsBot {
		clicksBot.Inc()
	}
	if err := s.recorder.Record(ctx, *c); err != nil {
		s.log.Warn("click not recorded; redirecting anyway", "click_id", c.ClickID, "link_id", c.LinkID, "err", err)
	}
	return newVisitor
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
