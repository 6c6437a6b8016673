package main

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tracectl/tracectl/transcript"
)

// parseWrap runs the wrap command's flag parsing only (the gh-style runF
// seam) and returns the options it would run with.
func parseWrap(t *testing.T, args ...string) (*wrapOptions, error) {
	t.Helper()
	var got *wrapOptions
	var out, errw bytes.Buffer
	cmd := newWrapCmd(streams{in: bytes.NewReader(nil), out: &out, err: &errw}, func(_ context.Context, _ streams, o *wrapOptions) error {
		got = o
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errw)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return got, err
}

// TestWrapFlags: what the flags parse to, and that everything after -- is
// the server's, flags included (npx -y ..., a server's own --flags).
func TestWrapFlags(t *testing.T) {
	o, err := parseWrap(t, "--bundle", "run.trace", "--key", "k.pem", "--durability", "batch", "--retain", "digest",
		"--call-timeout", "1500ms", "--grace", "2s", "--max-frame", "4096", "--server-name", "files",
		"--subject", "spiffe://example.org/agent", "--",
		"npx", "-y", "@modelcontextprotocol/server-everything", "--bundle", "not-ours", "--", "x")
	if err != nil {
		t.Fatal(err)
	}
	want := wrapOptions{
		bundle: "run.trace", key: "k.pem", durability: transcript.DurabilityBatch, retain: transcript.RetainDigest,
		callTimeout: 1500 * time.Millisecond, grace: 2 * time.Second, maxFrame: 4096, serverName: "files",
		record: recordIdentity{subject: "spiffe://example.org/agent"},
		server: []string{"npx", "-y", "@modelcontextprotocol/server-everything", "--bundle", "not-ours", "--", "x"},
	}
	if !slices.Equal(o.server, want.server) {
		t.Errorf("server argv %q, want %q", o.server, want.server)
	}
	o.server, want.server = nil, nil
	if !reflect.DeepEqual(*o, want) {
		t.Errorf("options %+v\nwant    %+v", *o, want)
	}
	if err := o.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
}

// TestWrapDefaults: strict durability, full retention, no call timeout, a
// 5 s grace and the 16 MiB frame limit unless asked otherwise.
func TestWrapDefaults(t *testing.T) {
	o, err := parseWrap(t, "--", "server")
	if err != nil {
		t.Fatal(err)
	}
	if o.durability != transcript.DurabilityStrict || o.retain != transcript.RetainFull || o.callTimeout != 0 ||
		o.grace != 5*time.Second || o.maxFrame != 16<<20 || o.bundle != "" || o.key != "" {
		t.Errorf("defaults %+v", *o)
	}
}

// TestWrapValidate: each invalid value is a usage error (exit 2), at the
// limit and one past it.
func TestWrapValidate(t *testing.T) {
	base := func() wrapOptions {
		return wrapOptions{durability: transcript.DurabilityStrict, retain: transcript.RetainFull, maxFrame: 1, grace: 0, callTimeout: 0}
	}
	for _, tc := range []struct {
		name string
		edit func(*wrapOptions)
		ok   bool
	}{
		{"minimal valid", func(*wrapOptions) {}, true},
		{"durability none", func(o *wrapOptions) { o.durability = transcript.DurabilityNone }, true},
		{"durability empty", func(o *wrapOptions) { o.durability = "" }, false},
		{"durability case", func(o *wrapOptions) { o.durability = "Strict" }, false},
		{"retain digest", func(o *wrapOptions) { o.retain = transcript.RetainDigest }, true},
		{"retain other", func(o *wrapOptions) { o.retain = "none" }, false},
		{"call timeout 0", func(o *wrapOptions) { o.callTimeout = 0 }, true},
		{"call timeout -1ns", func(o *wrapOptions) { o.callTimeout = -1 }, false},
		{"grace -1ns", func(o *wrapOptions) { o.grace = -1 }, false},
		{"max frame 1", func(o *wrapOptions) { o.maxFrame = 1 }, true},
		{"max frame 0", func(o *wrapOptions) { o.maxFrame = 0 }, false},
	} {
		o := base()
		tc.edit(&o)
		err := o.validate()
		var ee *exitError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case !tc.ok && (!errors.As(err, &ee) || ee.code != exitUsage):
			t.Errorf("%s: %v, want a usage error (exit %d)", tc.name, err, exitUsage)
		}
	}
}

// TestWrapNeedsServerAfterDash: a server command given without -- is
// refused (its flags would otherwise be taken for wrap's).
func TestWrapNeedsServerAfterDash(t *testing.T) {
	for _, args := range [][]string{{}, {"--"}, {"server"}, {"--bundle", "b", "server", "--", "x"}} {
		_, err := parseWrap(t, args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage {
			t.Errorf("wrap %q: %v, want a usage error", args, err)
		}
	}
}
