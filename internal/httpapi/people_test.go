package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// peopleFixture is the shared fixture with the people, program and partnership routes.
type peopleFixture struct {
	*programsFixture
}

func newPeopleFixture(t *testing.T) *peopleFixture {
	t.Helper()
	f := &peopleFixture{newProgramsFixture(t)}
	f.srv.MountPeople(f.people)
	return f
}

type teamMember struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Role  string `json:"role"`
}

type invitation struct {
	ID             string `json:"id"`
	Email          string `json:"email"`
	Role           string `json:"role"`
	Status         string `json:"status"`
	ProgramID      string `json:"program_id"`
	ProgramName    string `json:"program_name"`
	AdvertiserName string `json:"advertiser_name"`
}

// signInWithCode signs in with a magic code read from the SMTP listener, without a
// registration, and returns the answer.
func (f *peopleFixture) signInWithCode(t *testing.T, email string) response {
	t.Helper()
	return f.do(t, "POST", "/api/auth/magic-code/verify", nil, `{"email":"`+email+`","code":"`+f.code(t, email)+`"}`)
}

// userSession is a dashboard session of the user with the address, with its stored role.
func (f *peopleFixture) userSession(t *testing.T, email string) map[string]string {
	t.Helper()
	u, err := f.ids.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	co, err := f.ids.CompanyByID(context.Background(), u.CompanyID)
	if err != nil {
		t.Fatal(err)
	}
	return f.bearer(t, u.ID, u.CompanyID, co.Kind, u.Role)
}

// inviteMember invites the address to the team of who and takes the e-mail from the inbox
// (the sign-in code read next is then the next message).
func (f *peopleFixture) inviteMember(t *testing.T, who map[string]string, email, role string) invitation {
	t.Helper()
	r := f.do(t, "POST", "/api/team/invitations", who, `{"email":"`+email+`","role":"`+role+`"}`)
	if r.status != 201 {
		t.Fatalf("invite %s: %d %s", email, r.status, r.raw)
	}
	f.inbox.Wait(t, email, 5*time.Second)
	return decode[invitation](t, r)
}

func (f *peopleFixture) members(t *testing.T, who map[string]string) []teamMember {
	t.Helper()
	r := f.do(t, "GET", "/api/team/members", who, "")
	if r.status != 200 {
		t.Fatalf("members: %d %s", r.status, r.raw)
	}
	return decode[list[teamMember]](t, r).Data
}

func (f *peopleFixture) invitations(t *testing.T, path string, who map[string]string) []invitation {
	t.Helper()
	r := f.do(t, "GET", path, who, "")
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.status, r.raw)
	}
	return decode[list[invitation]](t, r).Data
}

func wantProblem(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status || r.problem.Code != code {
		t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.raw, status, code)
	}
}

func TestTeamInvitationJoinsTheCompanyAtFirstSignIn(t *testing.T) {
	f := newPeopleFixture(t)
	owner := f.advOwner
	r := f.do(t, "POST", "/api/team/invitations", owner, `{"email":" Colleague@Example.test ","role":"admin","locale":"es"}`)
	if r.status != 201 {
		t.Fatalf("invite: %d %s", r.status, r.raw)
	}
	inv := decode[invitation](t, r)
	if inv.Email != "colleague@example.test" || inv.Role != "admin" || inv.Status != "pending" {
		t.Fatalf("invitation %+v", inv)
	}
	msg := f.inbox.Wait(t, "colleague@example.test", 5*time.Second)
	if !strings.Contains(msg.Subject, "advertiser co") || !strings.Contains(msg.Text, "como administrador") ||
		!strings.Contains(msg.Text, "7 días") || !strings.Contains(msg.Text, "https://partners.example.test/login") {
		t.Fatalf("the e-mail, in Spanish, names the company, the role, its lifetime and where to sign in: %q %q", msg.Subject, msg.Text)
	}
	if got := f.invitations(t, "/api/team/invitations", owner); len(got) != 1 || got[0].ID != inv.ID {
		t.Fatalf("open invitations %+v", got)
	}

	// The first sign-in needs no sign-up form: it joins the inviting company as admin.
	r = f.signInWithCode(t, "colleague@example.test")
	if r.status != 200 {
		t.Fatalf("sign-in of the invitee: %d %s", r.status, r.raw)
	}
	u, err := f.ids.UserByEmail(context.Background(), "colleague@example.test")
	if err != nil || u.CompanyID != f.advID || u.Role != "admin" {
		t.Fatalf("the invitee's user %+v, %v: want an admin of %s", u, err, f.advID)
	}
	if got := f.invitations(t, "/api/team/invitations", owner); len(got) != 0 {
		t.Fatalf("an accepted invitation stays listed: %+v", got)
	}
	if got := f.members(t, owner); len(got) != 2 {
		t.Fatalf("members %+v", got)
	}
	// Single use: the address is a member now, and inviting it again says so.
	wantProblem(t, "invite a member", f.do(t, "POST", "/api/team/invitations", owner, `{"email":"colleague@example.test","role":"member"}`), 409, "already_member")
	wantProblem(t, "invite another company's user", f.do(t, "POST", "/api/team/invitations", owner, `{"email":"affiliate@example.test","role":"member"}`), 409, "email_has_account")
}

func TestTeamRolesAndTheLastOwner(t *testing.T) {
	f := newPeopleFixture(t)
	ctx := context.Background()
	owner := f.advOwner
	// Members read the team and change nothing.
	if got := f.members(t, f.advMember); len(got) != 1 {
		t.Fatalf("a member reads the team: %+v", got)
	}
	wantProblem(t, "a member invites", f.do(t, "POST", "/api/team/invitations", f.advMember, `{"email":"x@example.test","role":"member"}`), 403, "forbidden")
	wantProblem(t, "bad role", f.do(t, "POST", "/api/team/invitations", owner, `{"email":"x@example.test","role":"boss"}`), 400, "validation_failed")
	wantProblem(t, "bad address", f.do(t, "POST", "/api/team/invitations", owner, `{"email":"not an address","role":"member"}`), 400, "validation_failed")
	wantProblem(t, "bad locale", f.do(t, "POST", "/api/team/invitations", owner, `{"email":"x@example.test","role":"member","locale":"fr"}`), 400, "validation_failed")

	// An admin joins; admins do not make owners.
	f.inviteMember(t, owner, "admin@example.test", "admin")
	if r := f.signInWithCode(t, "admin@example.test"); r.status != 200 {
		t.Fatalf("admin sign-in: %d %s", r.status, r.raw)
	}
	admin := f.userSession(t, "admin@example.test")
	wantProblem(t, "an admin invites an owner", f.do(t, "POST", "/api/team/invitations", admin, `{"email":"o2@example.test","role":"owner"}`), 403, "forbidden")
	ownerUser, err := f.ids.UserByEmail(ctx, "advertiser@example.test")
	if err != nil {
		t.Fatal(err)
	}
	adminUser, err := f.ids.UserByEmail(ctx, "admin@example.test")
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, "an admin demotes the owner", f.do(t, "PATCH", "/api/team/members/"+ownerUser.ID, admin, `{"role":"member"}`), 403, "forbidden")
	wantProblem(t, "an admin removes the owner", f.do(t, "DELETE", "/api/team/members/"+ownerUser.ID, admin, ""), 403, "forbidden")

	// The last owner can neither step down nor leave.
	wantProblem(t, "the last owner steps down", f.do(t, "PATCH", "/api/team/members/"+ownerUser.ID, owner, `{"role":"admin"}`), 409, "last_owner")
	wantProblem(t, "the last owner leaves", f.do(t, "DELETE", "/api/team/members/"+ownerUser.ID, owner, ""), 409, "last_owner")

	// With a second owner, the first may step down; the promoted user's sessions ended.
	r := f.do(t, "PATCH", "/api/team/members/"+adminUser.ID, owner, `{"role":"owner"}`)
	if r.status != 200 || decode[teamMember](t, r).Role != "owner" {
		t.Fatalf("promote: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/team/members", admin, ""); r.status != 401 {
		t.Fatalf("a session of a user whose role changed still works: %d", r.status)
	}
	if r := f.do(t, "PATCH", "/api/team/members/"+ownerUser.ID, f.userSession(t, "admin@example.test"), `{"role":"member"}`); r.status != 200 {
		t.Fatalf("demote the first owner: %d %s", r.status, r.raw)
	}
	if u, _ := f.ids.UserByEmail(ctx, "advertiser@example.test"); u.Role != "member" {
		t.Fatalf("the first owner is %s", u.Role)
	}

	// Removing a member ends its access.
	newOwner := f.userSession(t, "admin@example.test")
	if r := f.do(t, "DELETE", "/api/team/members/"+ownerUser.ID, newOwner, ""); r.status != 204 {
		t.Fatalf("remove: %d %s", r.status, r.raw)
	}
	if _, err := f.ids.UserByEmail(ctx, "advertiser@example.test"); err == nil {
		t.Fatal("the removed user still exists")
	}
}

func TestTeamIsolationExpiryAndRevocation(t *testing.T) {
	f := newPeopleFixture(t)
	ctx := context.Background()
	owner := f.advOwner
	advUser, _ := f.ids.UserByEmail(ctx, "advertiser@example.test")
	invite := func(email string) invitation { return f.inviteMember(t, owner, email, "member") }
	revoked, expired := invite("revoked@example.test"), invite("late@example.test")

	// Another company sees none of it and can touch none of it.
	for _, m := range f.members(t, f.affOwner) {
		if m.Email != "affiliate@example.test" {
			t.Fatalf("the affiliate sees %+v", m)
		}
	}
	if got := f.invitations(t, "/api/team/invitations", f.affOwner); len(got) != 0 {
		t.Fatalf("the affiliate sees invitations %+v", got)
	}
	wantProblem(t, "foreign role change", f.do(t, "PATCH", "/api/team/members/"+advUser.ID, f.affOwner, `{"role":"member"}`), 404, "not_found")
	wantProblem(t, "foreign removal", f.do(t, "DELETE", "/api/team/members/"+advUser.ID, f.affOwner, ""), 404, "not_found")
	wantProblem(t, "foreign revocation", f.do(t, "DELETE", "/api/team/invitations/"+revoked.ID, f.affOwner, ""), 404, "not_found")
	wantProblem(t, "a member revokes", f.do(t, "DELETE", "/api/team/invitations/"+revoked.ID, f.advMember, ""), 403, "forbidden")

	// Revoked and expired invitations let nobody in: the address must sign up.
	if r := f.do(t, "DELETE", "/api/team/invitations/"+revoked.ID, owner, ""); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	wantProblem(t, "revoke twice", f.do(t, "DELETE", "/api/team/invitations/"+revoked.ID, owner, ""), 404, "not_found")
	if _, err := f.db.Exec(ctx, `UPDATE team_invitations SET created_at = now() - interval '8 days', expires_at = now() - interval '1 day' WHERE id = $1`, expired.ID); err != nil {
		t.Fatal(err)
	}
	got := f.invitations(t, "/api/team/invitations", owner)
	if len(got) != 1 || got[0].ID != expired.ID || got[0].Status != "expired" {
		t.Fatalf("open invitations %+v: want the expired one, listed as expired", got)
	}
	for _, email := range []string{"revoked@example.test", "late@example.test"} {
		wantProblem(t, email+" signs in", f.signInWithCode(t, email), 422, "registration_required")
	}
	// Inviting again renews the expired invitation.
	if again := invite("late@example.test"); again.ID != expired.ID || again.Status != "pending" {
		t.Fatalf("renewed %+v, want %s pending", again, expired.ID)
	}
	if r := f.signInWithCode(t, "late@example.test"); r.status != 200 {
		t.Fatalf("sign-in after renewal: %d %s", r.status, r.raw)
	}
}

func TestBrandInvitesAnAffiliateToAnInvitationOnlyProgram(t *testing.T) {
	f := newPeopleFixture(t)
	prg := f.createProgram(t, programs.Approval)
	path := "/api/programs/" + prg.ID + "/invitations"
	wantProblem(t, "a member invites", f.do(t, "POST", path, f.advMember, `{"email":"new@example.test"}`), 403, "forbidden")
	wantProblem(t, "an affiliate invites", f.do(t, "POST", path, f.affOwner, `{"email":"new@example.test"}`), 403, "forbidden")
	otherAdv, _ := f.company(t, identity.Advertiser)
	other := f.session(t, otherAdv, identity.Advertiser, "owner")
	wantProblem(t, "another brand invites", f.do(t, "POST", path, other, `{"email":"new@example.test"}`), 404, "not_found")
	wantProblem(t, "another brand lists", f.do(t, "GET", path, other, ""), 404, "not_found")

	r := f.do(t, "POST", path, f.advOwner, `{"email":"new@example.test"}`)
	if r.status != 201 {
		t.Fatalf("invite: %d %s", r.status, r.raw)
	}
	inv := decode[invitation](t, r)
	msg := f.inbox.Wait(t, "new@example.test", 5*time.Second)
	if !strings.Contains(msg.Text, `"Shoes"`) || !strings.Contains(msg.Subject, "advertiser co") {
		t.Fatalf("the e-mail names the program and the brand: %q %q", msg.Subject, msg.Text)
	}
	if got := f.invitations(t, path, f.advMember); len(got) != 1 || got[0].Email != "new@example.test" || got[0].Status != "pending" {
		t.Fatalf("the brand's pending invitations %+v", got)
	}

	// The invitee signs up as an affiliate and finds the invitation.
	f.signUp(t, "new@example.test", identity.Affiliate)
	invitee := f.userSession(t, "new@example.test")
	mine := f.invitations(t, "/api/affiliate-invitations", invitee)
	if len(mine) != 1 || mine[0].ID != inv.ID || mine[0].ProgramName != "Shoes" || mine[0].AdvertiserName != "advertiser co" || mine[0].Email != "" {
		t.Fatalf("the invitee's invitations %+v", mine)
	}
	// Nobody else sees or accepts it.
	if got := f.invitations(t, "/api/affiliate-invitations", f.affOwner); len(got) != 0 {
		t.Fatalf("another affiliate sees %+v", got)
	}
	wantProblem(t, "another affiliate accepts", f.do(t, "POST", "/api/affiliate-invitations/"+inv.ID+"/accept", f.affOwner, ""), 404, "not_found")
	wantProblem(t, "a brand lists affiliate invitations", f.do(t, "GET", "/api/affiliate-invitations", f.advOwner, ""), 403, "forbidden")

	r = f.do(t, "POST", "/api/affiliate-invitations/"+inv.ID+"/accept", invitee, "")
	if r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.raw)
	}
	if p := decode[partnership](t, r); p.Status != programs.Approved {
		t.Fatalf("partnership %+v: want approved", p)
	}
	wantProblem(t, "accept twice", f.do(t, "POST", "/api/affiliate-invitations/"+inv.ID+"/accept", invitee, ""), 404, "not_found")
	if got := f.invitations(t, path, f.advOwner); len(got) != 0 {
		t.Fatalf("an accepted invitation is still pending: %+v", got)
	}
	ptns := f.do(t, "GET", "/api/partnerships?program_id="+prg.ID, f.advOwner, "")
	if got := decode[list[partnership]](t, ptns).Data; len(got) != 1 || got[0].Status != programs.Approved {
		t.Fatalf("the brand's partnerships %s", ptns.raw)
	}

	// A revoked or expired invitation cannot be accepted.
	r = f.do(t, "POST", path, f.advOwner, `{"email":"affiliate@example.test"}`)
	if r.status != 201 {
		t.Fatalf("invite: %d %s", r.status, r.raw)
	}
	second := decode[invitation](t, r)
	if _, err := f.db.Exec(context.Background(), `UPDATE affiliate_invitations SET created_at = now() - interval '8 days', expires_at = now() - interval '1 day' WHERE id = $1`, second.ID); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, "accept an expired invitation", f.do(t, "POST", "/api/affiliate-invitations/"+second.ID+"/accept", f.affOwner, ""), 404, "not_found")
	if got := f.invitations(t, path, f.advOwner); len(got) != 1 || got[0].Status != "expired" {
		t.Fatalf("the brand sees the expired invitation %+v", got)
	}
	wantProblem(t, "another brand revokes", f.do(t, "DELETE", "/api/affiliate-invitations/"+second.ID, other, ""), 404, "not_found")
	if r := f.do(t, "DELETE", "/api/affiliate-invitations/"+second.ID, f.advOwner, ""); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
}

func TestPeopleRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, func(s *httpapi.Server) { s.MountPeople(nil) }, "openapi/13-people.yaml")
}

// An invited address signing in through Google joins the inviting company, even through
// the sign-up form: an address belongs to one company.
func TestTeamInvitationJoinsThroughOAuth(t *testing.T) {
	f := newPeopleFixture(t)
	f.inviteMember(t, f.advOwner, "gina@example.test", "member")
	f.google.SetUser(testenv.OIDCUser{Subject: "g-1", Email: "Gina@Example.test", EmailVerified: true, Name: "Gina"})
	start := f.do(t, "GET", "/api/auth/oauth/google/start?company_kind=affiliate&company_name=Gina%20Media&return_to=/app", nil, "")
	if start.status != 302 {
		t.Fatalf("start: %d %s", start.status, start.raw)
	}
	stateCookie, _ := cookiesOf(start)
	back := testenv.FollowAuthorize(t, start.header.Get("Location"))
	done := f.do(t, "GET", back.Path+"?"+back.RawQuery, map[string]string{"Cookie": stateCookie}, "")
	if done.status != 302 || done.header.Get("Location") != "/app" {
		t.Fatalf("callback: %d -> %q", done.status, done.header.Get("Location"))
	}
	u, err := f.ids.UserByEmail(context.Background(), "gina@example.test")
	if err != nil || u.CompanyID != f.advID || u.Role != "member" || u.Name != "Gina" {
		t.Fatalf("the invitee %+v, %v: want member Gina of %s", u, err, f.advID)
	}
}

// Creating an invitation twice with one Idempotency-Key makes one and sends one e-mail.
func TestInvitationCreatesAreIdempotent(t *testing.T) {
	f := newPeopleFixture(t)
	h := map[string]string{"Idempotency-Key": "invite-once"}
	for k, v := range f.advOwner {
		h[k] = v
	}
	first := f.do(t, "POST", "/api/team/invitations", h, `{"email":"once@example.test","role":"member"}`)
	again := f.do(t, "POST", "/api/team/invitations", h, `{"email":"once@example.test","role":"member"}`)
	if first.status != 201 || again.status != 201 || first.raw != again.raw {
		t.Fatalf("replay: %d %s, then %d %s", first.status, first.raw, again.status, again.raw)
	}
	f.inbox.Wait(t, "once@example.test", 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	if n := f.inbox.Count("once@example.test"); n != 1 {
		t.Fatalf("%d e-mails for one invitation", n)
	}
}
