package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

// verdictUnreadable is the many-bundle status of an input verify could not
// read (exit 2 alone).
const verdictUnreadable = "unreadable"

// manyResult is one input's outcome.
type manyResult struct {
	input string
	rep   *verify.Report
	err   error // with a nil rep: why the input could not be read
}

// status is the verdict, or unreadable.
func (m manyResult) status() string {
	if m.rep == nil {
		return verdictUnreadable
	}
	return string(m.rep.Verdict)
}

// severity orders statuses for the exit code: the worst one decides.
func severity(status string) int {
	switch status {
	case string(verify.Verified):
		return 0
	case string(verify.Incomplete):
		return 1
	case verdictUnreadable:
		return 2
	}
	return 3 // failed
}

// findBundles returns the inputs and, for each --recursive directory,
// every bundle under it (a directory holding record.json or
// transcript.jsonl; bundles are not searched further, links not followed),
// in lexical order.
func findBundles(inputs, roots []string) ([]string, error) {
	out := append([]string(nil), inputs...)
	for _, root := range roots {
		fi, err := os.Stat(root)
		if err != nil {
			return nil, usageErr(fmt.Errorf("--recursive: %w", err), "")
		}
		if !fi.IsDir() {
			return nil, usageErr(fmt.Errorf("--recursive %s: not a directory", root), "")
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			for _, name := range []string{transcript.RecordFile, transcript.TranscriptFile} {
				if _, err := os.Lstat(filepath.Join(path, name)); err == nil {
					out = append(out, path)
					return filepath.SkipDir
				}
			}
			return nil
		})
		if err != nil {
			return nil, usageErr(fmt.Errorf("--recursive %s: %w", root, err), "")
		}
	}
	return out, nil
}

func runVerifyMany(ctx context.Context, s streams, o *verifyOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.proof != "" {
		return usageErr(errors.New("--proof checks one record: give exactly one RECORD.json"), "")
	}
	vo, err := o.options()
	if err != nil {
		return err
	}
	v, err := verify.New(vo)
	if err != nil {
		hint := ""
		if vo.TrustedKey == nil && !vo.AllowEmbeddedKey {
			hint = "pass --trusted-key PUB, or --allow-embedded-key to check internal consistency only"
		}
		return usageErr(err, hint)
	}
	inputs, err := findBundles(o.inputs, o.recursive)
	if err != nil {
		return err
	}
	if len(inputs) == 0 {
		return usageErr(errors.New("no bundle found"), "--recursive finds directories holding record.json or transcript.jsonl")
	}

	// Verify in parallel, at most one per CPU; print in input order as
	// soon as each result and those before it are in.
	results := make([]chan manyResult, len(inputs))
	for i := range results {
		results[i] = make(chan manyResult, 1)
	}
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			one := *o
			one.input = in
			rep, err := verifyInput(ctx, v, &one)
			if rep == nil {
				if hint, ok, uerr := unsealedBundle(in); ok {
					err = fmt.Errorf("%w (%s)", uerr, hint)
				}
			}
			results[i] <- manyResult{input: in, rep: rep, err: err}
		}()
	}
	counts := map[string]int{}
	warned := false // a verified input with warnings
	worst := string(verify.Verified)
	var werr error
	for _, ch := range results {
		r := <-ch
		st := r.status()
		counts[st]++
		warned = warned || (r.rep != nil && r.rep.Verdict == verify.Verified && r.rep.Warnings > 0)
		if severity(st) > severity(worst) {
			worst = st
		}
		if werr == nil {
			werr = writeManyLine(s, o.format, r)
		}
	}
	wg.Wait()
	if werr != nil {
		return werr
	}
	if o.format != "json" {
		fmt.Fprintf(s.out, "total: %d inputs: %d verified, %d failed, %d incomplete, %d unreadable\n",
			len(inputs), counts[string(verify.Verified)], counts[string(verify.Failed)], counts[string(verify.Incomplete)], counts[verdictUnreadable])
	}
	switch worst {
	case string(verify.Verified):
		if o.failOnWarning && warned {
			return &exitError{code: exitWarnings}
		}
		return nil
	case string(verify.Incomplete):
		return &exitError{code: exitIncomplete}
	case verdictUnreadable:
		return &exitError{code: exitUsage}
	}
	return &exitError{code: exitFailed}
}

func writeManyLine(s streams, format string, r manyResult) error {
	if format == "json" {
		var v any
		if r.rep != nil {
			v = struct {
				Input string `json:"input"`
				*verify.Report
			}{r.input, r.rep}
		} else {
			v = struct {
				MediaType string `json:"media_type"`
				Input     string `json:"input"`
				Verdict   string `json:"verdict"`
				Error     string `json:"error"`
			}{verify.MediaType, r.input, verdictUnreadable, r.err.Error()}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = s.out.Write(append(jsonSafe(b), '\n'))
		return err
	}
	line := fmt.Sprintf("%-11s %s", r.status(), escapeTerminal(r.input))
	switch {
	case r.rep == nil:
		line += ": " + escapeTerminal(r.err.Error())
	case r.rep.Verdict == verify.Verified:
		if r.rep.Warnings > 0 {
			line += fmt.Sprintf(" (%d attempts, %s)", r.rep.Counts.Attempts, warningCount(r.rep.Warnings))
		} else {
			line += fmt.Sprintf(" (%d attempts)", r.rep.Counts.Attempts)
		}
	default:
		line += ": " + strings.Join(verdictCodes(r.rep), ", ")
	}
	_, err := fmt.Fprintln(s.out, line)
	return err
}

// verdictCodes are the codes behind a verdict that is not verified: the
// failing ones, else the unavailable and unsupported ones.
func verdictCodes(rep *verify.Report) []string {
	var out []string
	seen := map[verify.Code]bool{}
	for _, f := range rep.Findings {
		bad := f.Status == verify.StatusFail
		if rep.Verdict == verify.Incomplete {
			bad = f.Status == verify.StatusUnavailable || f.Status == verify.StatusUnsupported
		}
		if bad && !seen[f.Code] {
			seen[f.Code] = true
			out = append(out, string(f.Code))
		}
	}
	return out
}
