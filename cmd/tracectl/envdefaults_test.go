package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/spf13/cobra"
)

// parseWrapEnv parses wrap's flags under tracectl's root (so the
// environment defaults apply) with env as the environment.
func parseWrapEnv(t *testing.T, env map[string]string, args ...string) (*wrapOptions, error) {
	t.Helper()
	old := lookupEnv
	lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	t.Cleanup(func() { lookupEnv = old })
	return parseWrapWith(t, args...)
}

// TestEnvDefaults: TRACECTL_* variables default the flags a launch line
// would repeat; a flag given wins; an empty variable is ignored;
// TRACECTL_BUNDLE_DIR does not apply when --bundle names one bundle; a
// value the flag refuses is a usage error naming the variable.
func TestEnvDefaults(t *testing.T) {
	env := map[string]string{"TRACECTL_KEY": "/etc/agent/key.pem", "TRACECTL_BUNDLE_DIR": "/var/log/agent/bundles",
		"TRACECTL_RETAIN": "digest", "TRACECTL_CAPTURE": "never", "TRACECTL_DURABILITY": ""}
	o, err := parseWrapEnv(t, env, "server")
	if err != nil {
		t.Fatal(err)
	}
	if o.key != "/etc/agent/key.pem" || o.bundleDir != "/var/log/agent/bundles" || o.retain != "digest" || o.capture != "never" || o.durability != "strict" {
		t.Errorf("from the environment: key %q bundle-dir %q retain %q capture %q durability %q", o.key, o.bundleDir, o.retain, o.capture, o.durability)
	}
	o, err = parseWrapEnv(t, env, "--key", "k.pem", "--bundle", "run.trace", "--capture", "auto", "server")
	if err != nil {
		t.Fatal(err)
	}
	if o.key != "k.pem" || o.bundle != "run.trace" || o.bundleDir != "" || o.capture != "auto" {
		t.Errorf("flags given: key %q bundle %q bundle-dir %q capture %q", o.key, o.bundle, o.bundleDir, o.capture)
	}
	if err := o.validate(); err != nil {
		t.Errorf("--bundle with $TRACECTL_BUNDLE_DIR set: %v", err)
	}
	// A flag that parses its value refuses a bad one, and the error says
	// where it came from.
	root := &cobra.Command{Use: "x", PersistentPreRunE: func(c *cobra.Command, _ []string) error { return applyEnvDefaults(c) }, RunE: func(*cobra.Command, []string) error { return nil }}
	var n int
	root.Flags().IntVar(&n, "capture", 0, "")
	old := lookupEnv
	lookupEnv = func(k string) (string, bool) { return "many", k == "TRACECTL_CAPTURE" }
	defer func() { lookupEnv = old }()
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetArgs(nil)
	err = root.Execute()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage || !bytes.Contains([]byte(err.Error()), []byte("$TRACECTL_CAPTURE")) {
		t.Errorf("a refused value: %v", err)
	}
}
