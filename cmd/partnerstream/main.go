// Command partnerstream is the platform's one binary; each component is a subcommand.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	root := newRoot()
	if err := root.ExecuteContext(context.Background()); err != nil {
		// One line that names the command and the problem; settings errors name the flag and
		// the environment variable.
		fmt.Fprintf(os.Stderr, "partnerstream %s: %s\n", commandName(root), oneLine(err.Error()))
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:               "partnerstream",
		Short:             "PartnerStream: a Kubernetes-native affiliate marketing platform",
		Long:              "PartnerStream tracks clicks and conversions, computes commissions and payouts, reports statistics\nand sends signed webhooks and postbacks. Each component is a subcommand of this one binary.\nEvery flag can also be set through its PARTNERSTREAM_* environment variable.",
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.AddCommand(newAPICmd(), newIngestCmd(), newDeliverCmd(), newControllerCmd(), newMigrateCmd(), newDevCmd(), newSeedCmd(), newVersionCmd(), newSettingsCmd(root))
	return root
}

// oneLine folds multi-line driver errors (pgx lists every address it tried) into one line.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, " ")
}

func commandName(root *cobra.Command) string {
	if c, _, err := root.Find(os.Args[1:]); err == nil && c != root {
		return c.Name()
	}
	return "error"
}
