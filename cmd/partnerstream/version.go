package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String())
		},
	}
}

// newSettingsCmd prints the settings of every command as the README's Markdown table, so the
// documentation is generated from the code that parses the settings.
func newSettingsCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "settings",
		Short:  "Print every setting as a Markdown table",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprint(cmd.OutOrStdout(), settingsTable(root))
		},
	}
}

func settingsTable(root *cobra.Command) string {
	sets := map[string]*pflag.FlagSet{}
	for _, c := range root.Commands() {
		if c.Hidden || !c.HasAvailableLocalFlags() {
			continue
		}
		sets[c.Name()] = c.LocalFlags()
	}
	return config.Markdown(config.Docs(sets))
}
