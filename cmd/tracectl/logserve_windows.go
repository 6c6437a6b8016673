package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// tracectl log serve needs a POSIX file system (Tessera's POSIX driver);
// on windows the command says so. Anchoring to a log served elsewhere,
// verify --log-key and audit work everywhere.
func init() {
	commands = append(commands, func(s streams) *cobra.Command {
		cmd := &cobra.Command{Use: "log", Short: "Run a transparency log for anchoring (tracectl log serve; not on windows)", Args: cobra.NoArgs}
		cmd.AddCommand(&cobra.Command{
			Use:   "serve --dir DIR --listen ADDR",
			Short: "Serve an embedded Tessera transparency log (not on windows)",
			RunE: func(*cobra.Command, []string) error {
				return usageErr(errors.New("log serve needs a POSIX file system (Tessera's POSIX driver): not available on windows"), "run the log on Linux or macOS; wrap, proxy, verify and audit here can use it")
			},
			DisableFlagParsing: true,
		})
		return cmd
	})
}
