package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tracectl/tracectl/producer"
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
		"--call-timeout", "1500ms", "--capture", "always", "--grace", "2s", "--shutdown-timeout", "300ms", "--max-frame", "4096", "--server-name", "files",
		"--subject", "spiffe://example.org/agent", "--",
		"npx", "-y", "@modelcontextprotocol/server-everything", "--bundle", "not-ours", "--", "x")
	if err != nil {
		t.Fatal(err)
	}
	want := wrapOptions{
		bundle: "run.trace", key: "k.pem", durability: transcript.DurabilityBatch, retain: transcript.RetainDigest,
		callTimeout: 1500 * time.Millisecond, capture: "always", grace: 2 * time.Second, shutdownTimeout: 300 * time.Millisecond, maxFrame: 4096, serverName: "files", otlpSignals: "traces",
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
// 5 s grace, a 400 ms shutdown step and the 16 MiB frame limit unless asked otherwise.
func TestWrapDefaults(t *testing.T) {
	o, err := parseWrap(t, "--", "server")
	if err != nil {
		t.Fatal(err)
	}
	if o.durability != transcript.DurabilityStrict || o.retain != transcript.RetainFull || o.callTimeout != 0 ||
		o.grace != 5*time.Second || o.shutdownTimeout != 400*time.Millisecond || o.bundleDir != "" || o.maxFrame != 16<<20 || o.bundle != "" || o.key != "" {
		t.Errorf("defaults %+v", *o)
	}
}

// TestWrapValidate: each invalid value is a usage error (exit 2), at the
// limit and one past it.
func TestWrapValidate(t *testing.T) {
	base := func() wrapOptions {
		return wrapOptions{durability: transcript.DurabilityStrict, retain: transcript.RetainFull, maxFrame: 1, grace: 0, callTimeout: 0, shutdownTimeout: 1, capture: "auto"}
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
		{"shutdown timeout 1ns", func(o *wrapOptions) { o.shutdownTimeout = 1 }, true},
		{"shutdown timeout 0", func(o *wrapOptions) { o.shutdownTimeout = 0 }, false},
		{"bundle and bundle-dir", func(o *wrapOptions) { o.bundle, o.bundleDir = "b", "d" }, false},
		{"bundle-dir alone", func(o *wrapOptions) { o.bundleDir = "d" }, true},
		{"capture never", func(o *wrapOptions) { o.capture = "never" }, true},
		{"capture other", func(o *wrapOptions) { o.capture = "sometimes" }, false},
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

// TestWrapServerArgs: the first argument that is not a flag starts the
// server's command line (launchers strip or add a "--"); one leading "--"
// is accepted; no server command is a usage error.
func TestWrapServerArgs(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		bundle string
		server []string
	}{
		{[]string{"server"}, "", []string{"server"}},
		{[]string{"--bundle", "b", "server", "--", "x"}, "b", []string{"server", "--", "x"}},
		{[]string{"--bundle", "b", "npx", "-y", "pkg", "--bundle", "c"}, "b", []string{"npx", "-y", "pkg", "--bundle", "c"}},
		{[]string{"--bundle", "b", "--", "server", "-v"}, "b", []string{"server", "-v"}},
		{[]string{"--", "--", "server"}, "", []string{"server"}},
		{[]string{"--bundle", "b", "--", "--", "server", "--"}, "b", []string{"server", "--"}},
	} {
		o, err := parseWrap(t, tc.args...)
		if err != nil {
			t.Errorf("wrap %q: %v", tc.args, err)
			continue
		}
		if !slices.Equal(o.server, tc.server) || o.bundle != tc.bundle {
			t.Errorf("wrap %q: server %q bundle %q, want %q %q", tc.args, o.server, o.bundle, tc.server, tc.bundle)
		}
	}
	for _, args := range [][]string{{}, {"--"}, {"--", "--"}, {"--bundle", "b"}} {
		_, err := parseWrap(t, args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage {
			t.Errorf("wrap %q: %v, want a usage error", args, err)
		}
	}
}

// TestBundleName: UTC to the millisecond (names sort by start) and a random
// suffix (two starts in one millisecond differ).
func TestBundleName(t *testing.T) {
	at := time.Date(2026, 12, 1, 17, 2, 9, 123456789, time.FixedZone("x", 3600))
	got, err := bundleName(at, bytes.NewReader([]byte{0xde, 0xad, 0xbe, 0xef}))
	if err != nil {
		t.Fatal(err)
	}
	if want := "tracectl-20261201T160209.123Z-deadbeef.trace"; got != want {
		t.Errorf("bundleName = %q, want %q", got, want)
	}
	other, _ := bundleName(at, bytes.NewReader([]byte{0xde, 0xad, 0xbe, 0xee}))
	if other == got {
		t.Errorf("two starts in one millisecond got one name %q", got)
	}
	if _, err := bundleName(at, bytes.NewReader(nil)); err == nil {
		t.Error("bundleName without entropy: no error")
	}
}

// TestStateBundleDir: $XDG_STATE_HOME when absolute, else the OS's state
// directory; never the working directory.
func TestStateBundleDir(t *testing.T) {
	for _, tc := range []struct {
		goos string
		env  map[string]string
		want string
	}{
		{"linux", map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}, "/x/state/tracectl/bundles"},
		{"linux", map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/u"}, "/home/u/.local/state/tracectl/bundles"},
		{"linux", map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/tracectl/bundles"},
		{"darwin", map[string]string{"HOME": "/Users/u"}, "/Users/u/Library/Application Support/tracectl/bundles"},
		{"linux", map[string]string{}, ""},
	} {
		got, err := stateBundleDir(tc.goos, func(k string) string { return tc.env[k] })
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("%s %v: %q, %v; want %q", tc.goos, tc.env, got, err, tc.want)
		}
	}
}

// TestServerEnv: the passphrase variable never reaches the server; the
// rest of the environment does, in order.
func TestServerEnv(t *testing.T) {
	got := serverEnv([]string{"PATH=/bin", passwordEnv + "=secret", "HOME=/h", passwordEnv + "X=kept", "A=" + passwordEnv + "=x"})
	want := []string{"PATH=/bin", "HOME=/h", passwordEnv + "X=kept", "A=" + passwordEnv + "=x"}
	if !slices.Equal(got, want) {
		t.Errorf("serverEnv = %q, want %q", got, want)
	}
}

// TestWrapExit: the server's own failure is wrap's status; a server the
// proxy ended, or one that ended well, is 0; tracectl's failure is 125.
func TestWrapExit(t *testing.T) {
	sealed := &producer.Sealed{}
	for _, tc := range []struct {
		name string
		sum  *sessionSummary
		err  error
		want int
	}{
		{"client closed, server ended as asked with SIGTERM", &sessionSummary{sealed: sealed, res: &producer.SessionResult{ExitCode: 143}}, nil, 0},
		{"server exited 3 on its own", &sessionSummary{sealed: sealed, res: &producer.SessionResult{ExitCode: 3, EndedOnItsOwn: true}}, nil, 3},
		{"server killed by SIGKILL", &sessionSummary{sealed: sealed, res: &producer.SessionResult{ExitCode: 137, EndedOnItsOwn: true}}, nil, 137},
		{"server exited 0 on its own", &sessionSummary{sealed: sealed, res: &producer.SessionResult{EndedOnItsOwn: true}}, nil, 0},
		{"status unknown", &sessionSummary{sealed: sealed, res: &producer.SessionResult{ExitCode: -1, EndedOnItsOwn: true}}, nil, 1},
		{"no client byte, server failed with 3 as its stdin closed", &sessionSummary{dropped: true, res: &producer.SessionResult{ExitCode: 3}}, nil, 3},
		{"client bytes, server exited 1 when asked to stop", &sessionSummary{sealed: sealed, res: &producer.SessionResult{ExitCode: 1, ClientBytes: 40}}, nil, 0},
		{"audit unavailable", &sessionSummary{sealed: sealed, res: &producer.SessionResult{}}, producer.ErrAuditUnavailable, exitInternal},
		{"refused before start", nil, usageErr(errors.New("x"), ""), exitUsage},
	} {
		got := exitCode(wrapExit(tc.sum, tc.err), io.Discard)
		if got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}
