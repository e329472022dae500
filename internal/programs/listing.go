package programs

import (
	"fmt"
	"slices"
	"strings"
)

// Categories is the fixed list a program's categories come from; affiliates filter the
// listing by them and the dashboard translates them (listing.category.<name>).
var Categories = []string{"b2b", "education", "ecommerce", "fashion", "finance", "gaming", "health", "home", "marketing", "saas", "travel", "other"}

// Listing limits.
const (
	MaxCategories   = 3
	MaxTerms        = 10000
	MaxQuestions    = 3
	MaxQuestionText = 300
	MaxAnswer       = 2000
)

// Question is one question of a program's application form.
type Question struct {
	Text     string `json:"text"`
	Required bool   `json:"required"`
}

// Answer is an affiliate's answer, kept with the question's text as it was asked.
type Answer struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// listing checks the fields affiliates read in the listing: website, terms, categories and
// the application's questions.
func (v *validator) listing(p *Program) {
	if p.Website != "" {
		v.landingURL("website", p.Website)
	}
	v.text("terms", p.Terms, 0, MaxTerms, true)
	if len(p.Categories) > MaxCategories {
		v.add("categories", fmt.Sprintf("must be at most %d categories", MaxCategories))
	}
	seen := map[string]bool{}
	for i, c := range p.Categories {
		field := fmt.Sprintf("categories[%d]", i)
		switch {
		case !slices.Contains(Categories, c):
			v.add(field, "must be one of "+strings.Join(Categories, ", "))
		case seen[c]:
			v.add(field, "is repeated")
		}
		seen[c] = true
	}
	if len(p.Questions) > MaxQuestions {
		v.add("questions", fmt.Sprintf("must be at most %d questions", MaxQuestions))
	}
	for i := range p.Questions {
		p.Questions[i].Text = strings.TrimSpace(p.Questions[i].Text)
		v.text(fmt.Sprintf("questions[%d].text", i), p.Questions[i].Text, 1, MaxQuestionText, false)
	}
}

// answers checks an application's answers against the program's questions (one answer per
// question, in their order) and pairs them with the questions' text.
func answers(qs []Question, in []string, v *validator) []Answer {
	if len(in) > len(qs) {
		v.add("answers", fmt.Sprintf("must be at most one per question (%d)", len(qs)))
		return nil
	}
	out := make([]Answer, 0, len(qs))
	for i, q := range qs {
		a := ""
		if i < len(in) {
			a = strings.TrimSpace(in[i])
		}
		field := fmt.Sprintf("answers[%d]", i)
		if q.Required && a == "" {
			v.add(field, "is required")
			continue
		}
		v.text(field, a, 0, MaxAnswer, true)
		out = append(out, Answer{Question: q.Text, Answer: a})
	}
	return out
}
