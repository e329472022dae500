package fraud

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/cel"

	"github.com/partnerstream/partnerstream/internal/money"
)

// The custom rule is an expression in CEL, the Common Expression Language (Kubernetes'
// validation rules use it): side-effect free, terminating, type-checked when saved, and cost
// limited when run. Its variables are the context below (docs/fraud.md, "The custom rule").

const paramExpression = "expression"

// MaxExpression is the longest custom rule, in characters.
const MaxExpression = 2048

// MaxCost bounds one evaluation in CEL's cost units (about one per operation and per
// element a list function visits): an evaluation that would cost more stops, and the rule
// does not fire.
const MaxCost = 10000

// celEnv declares the context of the custom rule.
var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("country", cel.StringType),
		cel.Variable("asn", cel.IntType),
		cel.Variable("hosting", cel.BoolType),
		cel.Variable("device", cel.StringType),
		cel.Variable("browser", cel.StringType),
		cel.Variable("os", cel.StringType),
		cel.Variable("referrer_domain", cel.StringType),
		cel.Variable("utm_source", cel.StringType),
		cel.Variable("utm_medium", cel.StringType),
		cel.Variable("utm_campaign", cel.StringType),
		cel.Variable("paid_ads", cel.ListType(cel.StringType)),
		cel.Variable("recent_clicks", cel.IntType),
		cel.Variable("seconds_to_conversion", cel.IntType),
		cel.Variable("amount", cel.DoubleType),
		cel.Variable("currency", cel.StringType),
		cel.Variable("type", cel.StringType),
		cel.Variable("program_id", cel.StringType),
		cel.Variable("affiliate_id", cel.StringType),
		cel.Variable("link_id", cel.StringType),
	)
	if err != nil {
		panic(fmt.Sprintf("fraud: the custom rule's CEL environment: %v", err))
	}
	return env
}()

// CheckExpression compiles and type-checks a custom rule: it must be a CEL expression over
// the context that gives a bool. The error is the compiler's message.
func CheckExpression(expr string) error {
	_, err := compile(expr)
	return err
}

func compile(expr string) (cel.Program, error) {
	switch {
	case expr == "":
		return nil, errors.New("must be a CEL expression, not empty")
	case utf8.RuneCountInString(expr) > MaxExpression:
		return nil, fmt.Errorf("must be at most %d characters", MaxExpression)
	}
	ast, iss := celEnv.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %s", iss.Err())
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("must give a bool, gives %s", ast.OutputType())
	}
	prg, err := celEnv.Program(ast, cel.CostLimit(MaxCost), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("cannot be run: %w", err)
	}
	return prg, nil
}

// programs caches compiled custom rules by their text: a program is safe for concurrent use,
// and compiling one costs far more than running it. A program a program's settings no longer
// name stays until the cache is full, then every entry goes.
var programs = struct {
	sync.Mutex
	m map[string]cel.Program
}{m: map[string]cel.Program{}}

const maxPrograms = 1024

func program(expr string) (cel.Program, error) {
	programs.Lock()
	prg, ok := programs.m[expr]
	programs.Unlock()
	if ok {
		return prg, nil
	}
	prg, err := compile(expr)
	if err != nil {
		return nil, err
	}
	programs.Lock()
	if len(programs.m) >= maxPrograms {
		programs.m = map[string]cel.Program{}
	}
	programs.m[expr] = prg
	programs.Unlock()
	return prg, nil
}

// Context is the custom rule's variables for a click and its conversion.
func Context(k Click, c Conversion) map[string]any {
	seconds := int64(-1)
	if !k.At.IsZero() && !c.OccurredAt.IsZero() {
		seconds = int64(c.OccurredAt.Sub(k.At.Truncate(1e9)) / 1e9)
	}
	amount := float64(c.Amount)
	for range money.Exponent(c.Currency) {
		amount /= 10
	}
	paid := k.PaidAds
	if paid == nil {
		paid = []string{}
	}
	return map[string]any{
		"country": k.Country, "asn": int64(k.ASN), "hosting": k.Hosting, "device": k.DeviceType, "browser": k.Browser,
		"os": k.OS, "referrer_domain": k.ReferrerDomain, "utm_source": k.UTMSource, "utm_medium": k.UTMMedium,
		"utm_campaign": k.UTMCampaign, "paid_ads": paid, "recent_clicks": int64(k.RecentClicks),
		"seconds_to_conversion": seconds, "amount": amount, "currency": c.Currency, "type": c.Type,
		"program_id": c.ProgramID, "affiliate_id": c.AffiliateID, "link_id": k.LinkID,
	}
}

// evalRule runs a custom rule; an expression that does not compile (saved before a change of
// the context), fails or runs out of cost is false.
func evalRule(expr string, k Click, c Conversion) bool {
	prg, err := program(expr)
	if err != nil {
		return false
	}
	out, _, err := prg.Eval(Context(k, c))
	if err != nil {
		return false
	}
	b, ok := out.Value().(bool)
	return ok && b
}
