package freetext

import "testing"

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		s         string
		min, max  int
		multiline bool
		want      string
	}{
		{"Summer sale – ñ", 1, 200, false, ""},
		{"", 1, 200, false, "must be 1 to 200 characters"},
		{"", 0, 200, false, ""},
		{"ééé", 0, 2, false, "must be at most 2 characters"},
		{"a\u0007b", 1, 100, false, "must not contain control characters"},
		{"a\r\nb", 0, 255, false, "must not contain control characters"},
		{"a\x00b", 0, 255, true, "must not contain control characters"},
		{"a\u0085b", 0, 255, false, "must not contain control characters"}, // C1 next line
		{"line one\r\nline two\tend", 0, 2000, true, ""},
		{"a\x1b[31mred", 0, 2000, true, "must not contain control characters"},
		{"\xff", 0, 10, false, "must be valid UTF-8"},
	} {
		if got := Check(tt.s, tt.min, tt.max, tt.multiline); got != tt.want {
			t.Errorf("Check(%q, %d, %d, %v) = %q, want %q", tt.s, tt.min, tt.max, tt.multiline, got, tt.want)
		}
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"newsletter":              "newsletter",
		"\r\nSet-Cookie: x":       "Set-Cookie: x",
		"a\u0007b\x00c\td":        "abcd",
		"ñandú":                   "ñandú",
		"a\u0085b":                "ab",
		"bad\xffbyte":             "bad\uFFFDbyte",
		"\r\n":                    "",
		"tab\tand\x7fdel":         "tabanddel",
		"emoji 🎉 and \x1b[0m end": "emoji 🎉 and [0m end",
	} {
		got := Clean(in)
		if got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
		if Check(got, 0, 1000, false) != "" {
			t.Errorf("Clean(%q) = %q is not free text", in, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = Clean("spring_newsletter-2026") }); n != 0 {
		t.Errorf("cleaning clean text allocates %v times", n)
	}
}
