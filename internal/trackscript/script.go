package trackscript

import (
	_ "embed"
	"encoding/json"
)

//go:embed t.js
var scriptSource string

// Script returns the tracking script configured with a publishable key's settings, or, for
// nil settings (an unknown key), a script that only sets window.partnerstream.
func Script(key string, st *Settings) []byte {
	config := []byte("null")
	if st != nil {
		config, _ = json.Marshal(struct {
			Key    string   `json:"key"`
			Params []string `json:"params"`
			Model  string   `json:"model"`
			Days   int      `json:"days"`
		}{key, st.Params, st.Model, st.WindowDays})
	}
	out := make([]byte, 0, len(scriptSource)+len(config)+4)
	out = append(out, scriptSource...)
	out = append(out, '(')
	out = append(out, config...)
	return append(out, ");\n"...)
}
