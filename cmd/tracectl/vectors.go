package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/tracectl/tracectl/internal/vectors"
)

type vectorsRunOptions struct {
	dir      string // "" = the embedded vectors
	format   string
	verifier string // external verifier command, split on white space
	timeout  time.Duration
	run      string // only vectors whose id matches this regexp
}

type vectorsGenerateOptions struct {
	out string
}

type vectorsVerifyOptions struct {
	dir string
}

func init() {
	commands = append(commands, func(s streams) *cobra.Command {
		return newVectorsCmd(s, runVectorsRun, runVectorsGenerate, runVectorsVerify)
	})
}

func newVectorsCmd(s streams,
	runF func(context.Context, streams, *vectorsRunOptions) error,
	genF func(streams, *vectorsGenerateOptions) error,
	verifyF func(context.Context, streams, *vectorsVerifyOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vectors",
		Short: "Run or regenerate the acceptance vectors of the profile's nine cases",
		Long: `vectors holds the acceptance vectors of the TRACE v0.3 MCP transcript
profile's section 6 (spec/vectors.md): for each of the nine rows a positive
control and the negative or boundary cases it names, each a directory with
its evidence and a vector.json stating the expected verdict and codes.

The vectors are compiled into tracectl; 'vectors generate' writes them out,
'vectors run' checks a verifier against them (tracectl's own, or another
implementation through --verifier).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return usageErr(errors.New("a subcommand is required"), "run 'tracectl vectors --help'")
		},
	}
	cmd.AddCommand(newVectorsRunCmd(s, runF), newVectorsGenerateCmd(s, genF), newVectorsVerifyCmd(s, verifyF))
	return cmd
}

func newVectorsRunCmd(s streams, runF func(context.Context, streams, *vectorsRunOptions) error) *cobra.Command {
	o := &vectorsRunOptions{}
	cmd := &cobra.Command{
		Use:   "run [DIR] [--format text|json] [--run REGEXP] [--verifier 'CMD'] [--timeout DUR]",
		Short: "Check a verifier against every vector; exit 0 only if all pass",
		Long: `run verifies every vector in DIR (default: the vectors compiled into
tracectl) and prints one line per vector: row, vector, case, expected
verdict, verdict got, pass or fail, with the reasons of each failure.

A vector passes when the verdict is the expected one, every required code
is reported, and no forbidden code is. --run keeps the vectors whose id
matches a regular expression. Exit status: 0 when every vector run passes,
1 when one fails, 2 for usage errors, unreadable vectors, or a --run that
matches none.

--verifier runs another implementation instead of tracectl's: CMD is split
on white space (no quoting; use a wrapper script for more), the vector's
directory is appended as the last argument, and the command must print one
JSON object {"verdict": "...", "codes": [...]} on standard output
(spec/vectors.md); its exit status is not interpreted. 'tracectl vectors
verify DIR' is tracectl's own implementation of that contract.`,
		Example: "  tracectl vectors run\n" +
			"  tracectl vectors run --format json ./v1\n" +
			"  tracectl vectors run --run '^r6-'\n" +
			"  tracectl vectors run --verifier './my-verifier --quiet' ./v1",
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.dir = args[0]
			}
			return runF(c.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "text", "output format: text or json ("+vectors.RunMediaType+")")
	f.StringVar(&o.verifier, "verifier", "", "an external verifier command; the vector directory is appended as its last argument")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "how long the external verifier may take per vector")
	f.StringVar(&o.run, "run", "", "run only the vectors whose id matches this regular expression")
	return cmd
}

func newVectorsGenerateCmd(s streams, genF func(streams, *vectorsGenerateOptions) error) *cobra.Command {
	o := &vectorsGenerateOptions{}
	cmd := &cobra.Command{
		Use:   "generate --out DIR",
		Short: "Write every vector, regenerated from the fixed key, clock and entropy",
		Long: `generate rebuilds every vector deterministically (a fixed Ed25519 seed, a
fixed clock, fixed entropy) and writes them under DIR, which must not
exist. The output is byte for byte the vectors compiled into tracectl.`,
		Example: "  tracectl vectors generate --out ./v1",
		Args:    cobra.NoArgs,
		RunE:    func(*cobra.Command, []string) error { return genF(s, o) },
	}
	cmd.Flags().StringVar(&o.out, "out", "", "the directory to create (must not exist)")
	return cmd
}

func newVectorsVerifyCmd(s streams, verifyF func(context.Context, streams, *vectorsVerifyOptions) error) *cobra.Command {
	o := &vectorsVerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify VECTOR_DIR",
		Short: "Print tracectl's outcome for one vector, as an external verifier would",
		Long: `verify verifies one vector directory with tracectl's verifier and prints the
outcome JSON of the --verifier contract: {"verdict": "...", "codes": [...]}
(and "canonical" for a canon vector). It exits 0 whenever it printed an
outcome, whatever the verdict; 2 when the vector cannot be read.`,
		Example: "  tracectl vectors verify ./v1/r6-bytes-missing",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.dir = args[0]
			return verifyF(c.Context(), s, o)
		},
	}
	return cmd
}

func runVectorsGenerate(s streams, o *vectorsGenerateOptions) error {
	if o.out == "" {
		return usageErr(errors.New("--out is required"), "")
	}
	files, err := vectors.Generate()
	if err != nil {
		return err
	}
	if err := vectors.WriteDir(o.out, files); err != nil {
		hint := ""
		if errors.Is(err, fs.ErrExist) {
			hint = "generate never overwrites: choose a directory that does not exist"
		}
		return usageErr(err, hint)
	}
	vs, err := vectors.Load(os.DirFS(o.out))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.out, "%d vectors written to %s\n", len(vs), escapeTerminal(o.out))
	return err
}

func runVectorsVerify(ctx context.Context, s streams, o *vectorsVerifyOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	v, err := loadOneVector(o.dir)
	if err != nil {
		return usageErr(err, "give a vector directory holding vector.json")
	}
	out, err := vectors.Tracectl(ctx, v)
	if err != nil {
		return usageErr(fmt.Errorf("vector %s: %w", o.dir, err), "")
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = s.out.Write(append(b, '\n'))
	return err
}

// loadOneVector reads a single vector directory.
func loadOneVector(dir string) (*vectors.Vector, error) {
	fsys := os.DirFS(dir)
	data, err := readLimited(filepath.Join(dir, vectors.ManifestFile), vectors.MaxManifestBytes+1)
	if err != nil {
		return nil, err
	}
	m, err := vectors.ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &vectors.Vector{Dir: filepath.Base(dir), FS: fsys, Manifest: m}, nil
}

func runVectorsRun(ctx context.Context, s streams, o *vectorsRunOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.format != "text" && o.format != "json" {
		return usageErr(fmt.Errorf("unknown format %q", o.format), "use --format text or --format json")
	}
	argv := strings.Fields(o.verifier)
	if o.verifier != "" && len(argv) == 0 {
		return usageErr(errors.New("--verifier is empty"), "give the command to run, e.g. --verifier './my-verifier'")
	}
	if o.timeout <= 0 {
		return usageErr(errors.New("--timeout must be positive"), "")
	}
	var only *regexp.Regexp
	if o.run != "" {
		var err error
		if only, err = regexp.Compile(o.run); err != nil {
			return usageErr(fmt.Errorf("--run: %w", err), "give a Go regular expression matched against vector ids, e.g. '^r6-'")
		}
	}

	fsys, root, cleanup, err := vectorsSource(o.dir, len(argv) > 0)
	if err != nil {
		return err
	}
	defer cleanup()

	verifier, name := vectors.VerifierFunc(vectors.Tracectl), "tracectl"
	if len(argv) > 0 {
		verifier, name = externalVerifier(argv, root, o.timeout), o.verifier
	}
	vs, err := vectors.Load(fsys)
	if err != nil {
		return usageErr(err, "a vectors directory holds one directory per vector, each with vector.json")
	}
	if only != nil {
		vs = slices.DeleteFunc(vs, func(v *vectors.Vector) bool { return !only.MatchString(v.Dir) })
		if len(vs) == 0 {
			return usageErr(fmt.Errorf("--run %q matches no vector", o.run), "")
		}
	}
	res, err := vectors.RunVectors(ctx, vs, verifier)
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range res {
		if !r.Pass {
			failed = append(failed, r.ID)
		}
	}
	if o.format == "json" {
		err = writeRunJSON(s.out, name, res, len(failed))
	} else {
		err = writeRunText(s.out, name, res, len(failed))
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%d of %d vectors failed: %s", len(failed), len(res), strings.Join(failed, ", "))}
	}
	return nil
}

// vectorsSource returns the vectors to run: DIR, or the embedded copy. An
// external verifier needs files on disk, so the embedded copy is written
// to a temporary directory for it, removed by cleanup.
func vectorsSource(dir string, onDisk bool) (fs.FS, string, func(), error) {
	nothing := func() {}
	if dir != "" {
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, "", nothing, usageErr(err, "give a directory of vectors (tracectl vectors generate --out DIR writes one)")
		}
		if !fi.IsDir() {
			return nil, "", nothing, usageErr(fmt.Errorf("%s is not a directory", dir), "")
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, "", nothing, usageErr(err, "")
		}
		return os.DirFS(abs), abs, nothing, nil
	}
	if !onDisk {
		return vectors.Embedded(), "", nothing, nil
	}
	tmp, err := os.MkdirTemp("", "tracectl-vectors-")
	if err != nil {
		return nil, "", nothing, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	files, err := vectors.ReadTree(vectors.Embedded(), 1<<20)
	if err == nil {
		err = vectors.WriteDir(filepath.Join(tmp, "v1"), files)
	}
	if err != nil {
		cleanup()
		return nil, "", nothing, err
	}
	root := filepath.Join(tmp, "v1")
	return os.DirFS(root), root, cleanup, nil
}

// maxVerifierStderr bounds what is kept of an external verifier's stderr
// for a failure message.
const maxVerifierStderr = 2048

// externalVerifier runs argv with the vector's directory appended and
// parses its standard output as an outcome. The exit status is not
// interpreted: verifiers conventionally exit non-zero for a failed
// verdict, and the printed outcome is what counts.
func externalVerifier(argv []string, root string, timeout time.Duration) vectors.VerifierFunc {
	return func(ctx context.Context, v *vectors.Vector) (*vectors.Outcome, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], filepath.Join(root, v.Dir))...)
		stdout := &capped{max: vectors.MaxOutcomeBytes + 1}
		stderr := &capped{max: maxVerifierStderr, tail: true}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		// A verifier's children may hold its output open after it is
		// killed: stop waiting for them soon after.
		cmd.WaitDelay = time.Second
		runErr := cmd.Run()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("verifier timed out after %s", timeout)
		}
		var ee *exec.ExitError
		if runErr != nil && !errors.As(runErr, &ee) {
			return nil, fmt.Errorf("run verifier: %w", runErr)
		}
		o, err := vectors.ParseOutcome(stdout.b)
		if err != nil {
			if msg := strings.TrimSpace(string(stderr.b)); msg != "" {
				err = fmt.Errorf("%w (verifier stderr: %s)", err, msg)
			}
			return nil, err
		}
		return o, nil
	}
}

// capped keeps at most max bytes written to it: the first ones, or with
// tail the last ones.
type capped struct {
	b    []byte
	max  int
	tail bool
}

func (c *capped) Write(p []byte) (int, error) {
	switch {
	case c.tail:
		c.b = append(c.b, p...)
		if len(c.b) > c.max {
			c.b = c.b[len(c.b)-c.max:]
		}
	case len(c.b) < c.max:
		c.b = append(c.b, p[:min(len(p), c.max-len(c.b))]...)
	}
	return len(p), nil
}

func writeRunText(w io.Writer, name string, res []vectors.Result, failed int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tVECTOR\tCASE\tEXPECTED\tGOT\tRESULT")
	for _, r := range res {
		got, result := "-", "pass"
		if r.Got != nil {
			got = escapeTerminal(r.Got.Verdict)
		}
		if !r.Pass {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Row, r.ID, r.Case, r.Expected.Verdict, got, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range res {
		if r.Pass {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", r.ID)
		if r.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", escapeTerminal(r.Error))
		}
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s\n", escapeTerminal(p))
		}
	}
	_, err := fmt.Fprintf(w, "\n%d vectors: %d pass, %d fail (verifier: %s)\n", len(res), len(res)-failed, failed, escapeTerminal(name))
	return err
}

func writeRunJSON(w io.Writer, name string, res []vectors.Result, failed int) error {
	b, err := json.MarshalIndent(struct {
		MediaType string           `json:"media_type"`
		Verifier  string           `json:"verifier"`
		Vectors   int              `json:"vectors"`
		Passed    int              `json:"passed"`
		Failed    int              `json:"failed"`
		Results   []vectors.Result `json:"results"`
	}{vectors.RunMediaType, name, len(res), len(res) - failed, failed, res}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
