// Package config reads the settings of every component from flags and PARTNERSTREAM_*
// environment variables (a flag given on the command line wins over the environment).
// Settings are declared once, in groups, so the README table is generated from the same
// declarations that parse them (`partnerstream settings`).
package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// EnvPrefix starts every environment variable of the platform.
const EnvPrefix = "PARTNERSTREAM_"

// EnvName is the environment variable that sets the flag: log-level -> PARTNERSTREAM_LOG_LEVEL.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Group is a set of related settings that several components share (Postgres, Kafka, ...).
type Group interface {
	// Register declares the group's flags.
	Register(fs *pflag.FlagSet)
	// Validate checks the values after flags and environment were applied. Errors name the
	// setting through Invalid or Missing.
	Validate() error
}

// Load registers the groups on fs, parses args, applies the environment to every flag that
// was not given, and validates each group. The first problem is returned as one line that
// names the setting.
func Load(fs *pflag.FlagSet, args []string, groups ...Group) error {
	for _, g := range groups {
		g.Register(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	return Apply(fs, groups...)
}

// Apply sets the flags that were not given on the command line from the environment, then
// validates the groups. Callers whose flags were already parsed (cobra) use it directly.
func Apply(fs *pflag.FlagSet, groups ...Group) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		if f.Changed {
			if _, secret := f.Annotations[envOnlyAnnotation]; secret {
				err = Invalid(f.Name, fmt.Errorf("is read from %s only, never from the command line, which every user of the machine can see", EnvName(f.Name)))
			}
			return
		}
		v, ok := os.LookupEnv(EnvName(f.Name))
		if !ok {
			return
		}
		if setErr := fs.Set(f.Name, v); setErr != nil {
			err = Invalid(f.Name, setErr)
		}
	})
	if err != nil {
		return err
	}
	for _, g := range groups {
		if err := g.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// envOnlyAnnotation marks a flag that holds a secret: Apply refuses it on the command line.
const envOnlyAnnotation = "partnerstream/env-only"

// envOnly makes the flag name settable from its environment variable only.
func envOnly(fs *pflag.FlagSet, name string) {
	_ = fs.SetAnnotation(name, envOnlyAnnotation, []string{"true"})
}

// SettingError names the setting that is wrong, as flag and environment variable.
type SettingError struct {
	Flag string
	Err  error
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("setting --%s (%s): %v", e.Flag, EnvName(e.Flag), e.Err)
}

func (e *SettingError) Unwrap() error { return e.Err }

// Invalid reports a bad value of a setting.
func Invalid(flag string, err error) error { return &SettingError{Flag: flag, Err: err} }

// Missing reports a required setting that has no value.
func Missing(flag string) error {
	return &SettingError{Flag: flag, Err: errors.New("is required")}
}

// Doc is one row of the settings table.
type Doc struct {
	Flag, Env, Default, Usage string
	Commands                  []string
	// Other lists other commands' defaults where they differ ("dev: .local/spool").
	Other []string
}

// Docs lists the settings of the given commands (command name -> its flag set), one row per
// flag, with the commands that take it. The default shown is the first command's (by name)
// other than dev; a different default of another command is listed beside it.
func Docs(sets map[string]*pflag.FlagSet) []Doc {
	cmds := make([]string, 0, len(sets))
	for cmd := range sets {
		cmds = append(cmds, cmd)
	}
	sort.Slice(cmds, func(i, j int) bool {
		if di, dj := cmds[i] == "dev", cmds[j] == "dev"; di != dj {
			return dj // dev last
		}
		return cmds[i] < cmds[j]
	})
	rows := map[string]*Doc{}
	for _, cmd := range cmds {
		sets[cmd].VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			d, ok := rows[f.Name]
			if !ok {
				d = &Doc{Flag: f.Name, Env: EnvName(f.Name), Default: f.DefValue, Usage: f.Usage}
				rows[f.Name] = d
			} else if f.DefValue != d.Default {
				d.Other = append(d.Other, cmd+": `"+f.DefValue+"`")
			}
			d.Commands = append(d.Commands, cmd)
		})
	}
	out := make([]Doc, 0, len(rows))
	for _, d := range rows {
		sort.Strings(d.Commands)
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Flag < out[j].Flag })
	return out
}

// Markdown renders the settings table for the README.
func Markdown(docs []Doc) string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | commands | meaning |\n|---|---|---|---|---|\n")
	for _, d := range docs {
		def := d.Default
		if def == "" || def == "[]" {
			def = " "
		} else {
			def = "`" + def + "`"
		}
		if len(d.Other) > 0 {
			def += " (" + strings.Join(d.Other, ", ") + ")"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s | %s |\n", d.Flag, d.Env, def, strings.Join(d.Commands, ", "), d.Usage)
	}
	return b.String()
}
