package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionMediaType is the versioned media type of `tracectl version
// --format json`.
const versionMediaType = "application/vnd.tracectl.version.v1+json"

type versionOptions struct {
	format string
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command { return newVersionCmd(s, runVersion) })
}

func newVersionCmd(s streams, runF func(streams, *versionOptions) error) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version [--format text|json]",
		Short: "Print the module version, VCS revision and Go version this binary was built from",
		Long: `version prints what this binary was built from, as the Go toolchain recorded
it (runtime/debug.ReadBuildInfo; "go version -m tracectl" reads the same):
the module version ("(devel)" for a build from a clone), the VCS revision and
commit time and whether the tree had uncommitted changes (absent when built
without VCS stamping: go run, -buildvcs=false, or a git worktree), the Go
version and the target platform.

A bundle's header names the producer as "tracectl VERSION REVISION[+dirty]",
the same values.`,
		Example: "  tracectl version\n  tracectl version --format json",
		Args:    cobra.NoArgs,
		RunE:    func(c *cobra.Command, args []string) error { return runF(s, o) },
	}
	cmd.Flags().StringVar(&o.format, "format", "text", "output format: text or json ("+versionMediaType+")")
	return cmd
}

// buildVersion is what `tracectl version` reports.
type buildVersion struct {
	MediaType string `json:"media_type"`
	Module    string `json:"module"`
	Version   string `json:"version"`
	Revision  string `json:"vcs_revision,omitempty"`
	Time      string `json:"vcs_time,omitempty"`
	// Modified is absent when the build recorded no VCS state, which is
	// not the same as a clean tree.
	Modified  *bool  `json:"vcs_modified,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// buildVersionOf reads a binary's build information; ok false (a binary
// built without module support) leaves only the Go version and platform
// of the running binary.
func buildVersionOf(bi *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{MediaType: versionMediaType, Module: "(unknown)", Version: "(unknown)",
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return v
	}
	v.Module, v.Version = bi.Main.Path, bi.Main.Version
	if v.Module == "" {
		v.Module = "(unknown)" // a test binary
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		v.Platform = goos + "/" + goarch
	}
	return v
}

// short is the one-word version a bundle's producer and the report name:
// VERSION, or VERSION REVISION[+dirty].
func (v buildVersion) short() string {
	if v.Revision == "" {
		return v.Version
	}
	dirty := ""
	if v.Modified != nil && *v.Modified {
		dirty = "+dirty"
	}
	return v.Version + " " + v.Revision + dirty
}

func (v buildVersion) writeText(w io.Writer) error {
	rev := "unknown (built without VCS stamping)"
	if v.Revision != "" {
		rev = v.Revision
		if v.Time != "" {
			rev += " (" + v.Time + ")"
		}
		if v.Modified != nil && *v.Modified {
			rev += ", modified"
		}
	}
	_, err := fmt.Fprintf(w, "tracectl %s\nmodule:   %s\nrevision: %s\ngo:       %s %s\n",
		escapeTerminal(v.Version), escapeTerminal(v.Module), escapeTerminal(rev), escapeTerminal(v.GoVersion), escapeTerminal(v.Platform))
	return err
}

// version reports the module version and VCS revision of this binary.
func version() string {
	return buildVersionOf(debug.ReadBuildInfo()).short()
}

func runVersion(s streams, o *versionOptions) error {
	v := buildVersionOf(debug.ReadBuildInfo())
	switch o.format {
	case "text":
		return v.writeText(s.out)
	case "json":
		out, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = s.out.Write(append(jsonSafe(out), '\n'))
		return err
	}
	return usageErr(fmt.Errorf("unknown --format %q", o.format), "use --format text or json")
}
