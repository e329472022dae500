package httpapi

import "testing"

func TestRepeatedKey(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"distinct keys are fine", `{"external_id":"A","amount":"1.00"}`, ""},
		{"a repeated key at the top", `{"external_id":"A","external_id":"B"}`, "external_id"},
		{"a key repeated in another case", `{"amount":"1.00","Amount":"2.00"}`, "Amount"},
		{"a repeated key deep inside", `{"metadata":{"a":[{"x":1},{"y":{"k":1,"k":2}}]}}`, "k"},
		{"the same key in two objects is fine", `{"a":{"k":1},"b":{"k":2},"c":[{"k":3},{"k":4}]}`, ""},
		{"a string value equal to a key is fine", `{"k":"k","v":["k","k"]}`, ""},
		{"a key after a nested value is still a key", `{"a":{"b":1},"a":2}`, "a"},
		{"not JSON says nothing", `{"a":`, ""},
		{"a bare array", `[{"a":1},{"a":1}]`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := repeatedKey([]byte(tt.body)); got != tt.want {
				t.Errorf("repeatedKey(%s) = %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}
