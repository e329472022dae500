package conversions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/ids"
)

func TestPostbackTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	token, err := e.svc.RotatePostbackToken(ctx, e.adv, e.program)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, "pbt_") || len(token) != 94 {
		t.Fatalf("token %q", token)
	}
	if n := e.count(t, `SELECT count(*) FROM program_postback_tokens WHERE position($1::bytea IN token_hash) > 0`, []byte(token)); n != 0 {
		t.Fatal("the token is stored as it is")
	}
	second := e.newProgram(t, e.adv, "EUR", "fixed", 100, nil)
	e.partner(t, second, e.aff, "", 0)

	in := func(program string) conversions.NewConversion {
		return conversions.NewConversion{ClickID: e.click(t, program, e.aff, now.Add(-time.Hour)), ExternalID: ids.New("ord"), Amount: "5"}
	}
	c, created, err := e.svc.RegisterPostback(ctx, token, in(e.program), nil)
	if err != nil || !created || c.Source != conversions.SourcePostback || c.ProgramID != e.program || c.AdvertiserID != e.adv {
		t.Fatalf("RegisterPostback = %+v, %v, %v", c, created, err)
	}
	if _, _, err := e.svc.RegisterPostback(ctx, token, in(second), nil); !errors.Is(err, conversions.ErrUnknownClick) {
		t.Fatalf("a click of another program of the same advertiser: %v, want ErrUnknownClick", err)
	}

	flipped := token[:len(token)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", token[len(token)-1])+1)%16])
	otherProgram := ids.New(ids.Program)
	for name, bad := range map[string]string{
		"empty":                           "",
		"one character changed":           flipped,
		"truncated":                       token[:len(token)-1],
		"an API key":                      "ps_" + strings.Repeat("a", 40),
		"a token for a program with none": "pbt_" + otherProgram[4:] + strings.Repeat("0", 64),
	} {
		if _, _, err := e.svc.RegisterPostback(ctx, bad, in(e.program), nil); !errors.Is(err, conversions.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}

	rotated, err := e.svc.RotatePostbackToken(ctx, e.adv, e.program)
	if err != nil || rotated == token {
		t.Fatalf("rotate: %q, %v", rotated, err)
	}
	if _, _, err := e.svc.RegisterPostback(ctx, token, in(e.program), nil); !errors.Is(err, conversions.ErrInvalidToken) {
		t.Fatalf("the replaced token still works: %v", err)
	}
	if _, _, err := e.svc.RegisterPostback(ctx, rotated, in(e.program), nil); err != nil {
		t.Fatalf("the new token: %v", err)
	}

	other := e.company(t, "advertiser")
	for _, program := range []string{e.program, ids.New(ids.Program), "garbage"} {
		if _, err := e.svc.RotatePostbackToken(ctx, other, program); !errors.Is(err, conversions.ErrNotFound) {
			t.Fatalf("another advertiser rotated %s: %v", program, err)
		}
	}
}
