package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
)

// repeatedKey returns the first key that appears twice in one object of body, at any depth,
// or "" when none does (or when body is not JSON: the decoder says why). Keys are compared
// without regard to case, as encoding/json matches them to fields: {"amount":1,"Amount":2}
// would otherwise be read as 2 by us and as 1 by a proxy or signature checker that takes the
// first key.
func repeatedKey(body []byte) string {
	type level struct {
		keys      map[string]bool // nil in an array
		expectKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.keys != nil && top.expectKey {
			k := strings.ToLower(s)
			if top.keys[k] {
				return s
			}
			top.keys[k], top.expectKey = true, false
			continue
		}
		switch tok {
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.keys != nil {
			top.expectKey = true // this value (or the object or array it opens) ends the member
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{keys: map[string]bool{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		}
	}
}
