package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Output formats of the commands that print one result: text for people
// (the default) and json for scripts, one JSON object on one line of
// stdout whose member names are stable (snake_case) and whose strings hold
// no raw control, bidi or invisible character (jsonSafe). Human messages
// stay on stderr either way.
const (
	formatText = "text"
	formatJSON = "json"
)

// formatFlag adds --format text|json to cmd; mediaType names the JSON
// object's media_type.
func formatFlag(cmd *cobra.Command, p *string, mediaType string) {
	cmd.Flags().StringVar(p, "format", formatText, "output format: text or json ("+mediaType+")")
}

// checkFormat refuses an unknown --format as a usage error; commands call
// it before they do anything, so a typo changes nothing.
func checkFormat(f string) error {
	if f == formatText || f == formatJSON {
		return nil
	}
	return usageErr(fmt.Errorf("unknown --format %q", f), "use --format text or json")
}

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(jsonSafe(b), '\n'))
	return err
}
