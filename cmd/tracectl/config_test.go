package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestParseConfig: a config file is one YAML mapping of known keys to
// strings; relative paths resolve against the file's directory (a KMS
// reference and an absolute path stay as written); every refusal is a
// *configError naming the file and the line, with its sentinel.
func TestParseConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc")
	abs := filepath.Join(t.TempDir(), "key.pem")
	for _, tc := range []struct {
		name, in string
		want     map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"comments only", "# nothing yet\n", map[string]string{}},
		{"empty mapping", "{}\n", map[string]string{}},
		{"every key", "key: keys/agent.pem\ntrusted-key: agent.pub\nbundle-dir: ../bundles\nretain: digest\ndurability: batch\ncapture: never\n",
			map[string]string{"key": filepath.Join(dir, "keys", "agent.pem"), "trusted-key": filepath.Join(dir, "agent.pub"),
				"bundle-dir": filepath.Join(filepath.Dir(dir), "bundles"), "retain": "digest", "durability": "batch", "capture": "never"}},
		{"absolute and KMS", "key: awskms:///alias/agent\ntrusted-key: '" + abs + "'\n",
			map[string]string{"key": "awskms:///alias/agent", "trusted-key": abs}},
		{"quoted and anchored strings", "retain: \"full\"\nbundle-dir: &d 'b'\n",
			map[string]string{"retain": "full", "bundle-dir": filepath.Join(dir, "b")}},
	} {
		cfg, err := parseConfig("config.yaml", dir, []byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := map[string]string{}
		for k, v := range cfg.values {
			got[k] = v.value
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}

	for _, tc := range []struct {
		name, in string
		line     int
		want     error
		msg      string // the whole message, for the ones the brief quotes
	}{
		{"unknown key", "# agent\nretain: full\nkye: k.pem\n", 3, errConfigUnknownKey,
			`config.yaml:3: unknown key "kye" (known: bundle-dir, capture, durability, key, retain, trusted-key)`},
		{"duplicate key", "key: a.pem\nretain: full\nkey: b.pem\n", 3, errConfigDuplicate, `config.yaml:3: duplicate key "key" (first at line 1)`},
		{"a list", "key:\n  - a.pem\n", 1, errConfigType, `config.yaml:1: wrong type: key: want a string, not a list`},
		{"a mapping", "retain: {a: 1}\n", 1, errConfigType, ""},
		{"an integer", "capture: 5\n", 1, errConfigType, `config.yaml:1: wrong type: capture: want a string, not int (quote it)`},
		{"a boolean", "key: true\n", 1, errConfigType, ""},
		{"null", "key:\n", 1, errConfigType, ""},
		{"an alias", "key: &k a.pem\ntrusted-key: *k\n", 2, errConfigType, ""},
		{"a key not a string", "1: a\n", 1, errConfigType, ""},
		{"a key a list", "? [a]\n: b\n", 1, errConfigType, ""},
		{"merge key", "<<: {key: a}\n", 1, errConfigType, ""},
		{"empty string", "key: ''\n", 1, errConfigValue, ""},
		{"a value not in the list", "\nretain: all\n", 2, errConfigValue, `config.yaml:2: invalid value: retain "all": want full, digest`},
		{"a list file", "- key: a\n", 1, errConfigNotMapping, `config.yaml:1: not a YAML mapping`},
		{"a scalar file", "\n\nkey\n", 3, errConfigNotMapping, ""},
		{"a null file", "~\n", 1, errConfigNotMapping, ""},
		{"syntax", "key: a\n  retain: full\n", 2, errConfigSyntax, ""},
		{"tab", "key: a\n\tretain: full\n", 2, errConfigSyntax, ""},
		{"two documents", "key: a\n---\nretain: full\n", 2, errConfigSyntax, ""},
		{"too large", "#" + strings.Repeat("x", maxConfigBytes), 0, errConfigTooLarge, ""},
	} {
		_, err := parseConfig("config.yaml", dir, []byte(tc.in))
		var ce *configError
		if !errors.As(err, &ce) || !errors.Is(err, tc.want) || ce.File != "config.yaml" || ce.Line != tc.line {
			t.Errorf("%s: %v (%#v), want %v at line %d", tc.name, err, ce, tc.want, tc.line)
			continue
		}
		if tc.msg != "" && err.Error() != tc.msg {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, err, tc.msg)
		}
	}
	// The limit itself is fine.
	if _, err := parseConfig("config.yaml", dir, []byte("#"+strings.Repeat("x", maxConfigBytes-2)+"\n")); err != nil {
		t.Errorf("a file of exactly %d bytes: %v", maxConfigBytes, err)
	}
}

// TestConfigKeysAreEnvDefaults: the config file holds exactly the flags
// the environment defaults.
func TestConfigKeysAreEnvDefaults(t *testing.T) {
	var flags []string
	for _, d := range envDefaults {
		flags = append(flags, d.flag)
	}
	slices.Sort(flags)
	if got := configKeyNames(); !slices.Equal(got, flags) {
		t.Errorf("config keys %v, environment defaults %v", got, flags)
	}
	for k := range configKeys {
		if !strings.Contains(configHelp, "\n  "+k+":") {
			t.Errorf("tracectl help config does not show %s", k)
		}
	}
}

// withConfigEnv makes env the environment and home the home directory for
// the rest of the test.
func withConfigEnv(t *testing.T, env map[string]string, home string) {
	t.Helper()
	oldEnv, oldHome := lookupEnv, userHomeDir
	lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	userHomeDir = func() (string, error) {
		if home == "" {
			return "", errors.New("no home")
		}
		return home, nil
	}
	t.Cleanup(func() { lookupEnv, userHomeDir = oldEnv, oldHome })
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// parseWrapWith parses wrap's flags under tracectl's root, as
// parseWrapEnv, with the environment set by withConfigEnv.
func parseWrapWith(t *testing.T, args ...string) (*wrapOptions, error) {
	t.Helper()
	var got *wrapOptions
	var out bytes.Buffer
	s := streams{in: bytes.NewReader(nil), out: &out, err: &out}
	root := newRootCmd(s)
	for _, c := range root.Commands() {
		if c.Name() == "wrap" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newWrapCmd(s, func(_ context.Context, _ streams, o *wrapOptions) error { got = o; return nil }))
	root.SetArgs(append([]string{"wrap"}, args...))
	_, err := root.ExecuteC()
	return got, err
}

// TestConfigPrecedence: a flag given wins over the environment, which wins
// over the config file; the file is $TRACECTL_CONFIG, else
// $XDG_CONFIG_HOME/tracectl/config.yaml, else ~/.config/tracectl/config.yaml;
// a missing default file is fine, a missing $TRACECTL_CONFIG and a bad file
// are usage errors naming the file (and line).
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "etc", "tracectl.yaml")
	writeFile(t, file, "key: keys/file.pem\nretain: digest\ncapture: never\ndurability: batch\nbundle-dir: bundles\n")
	env := map[string]string{configEnv: file, "TRACECTL_RETAIN": "full", "TRACECTL_CAPTURE": ""}
	withConfigEnv(t, env, "")
	o, err := parseWrapWith(t, "--durability", "none", "server")
	if err != nil {
		t.Fatal(err)
	}
	got := [5]string{o.key, o.retain, o.capture, o.durability, o.bundleDir}
	want := [5]string{
		filepath.Join(dir, "etc", "keys", "file.pem"), // the file, resolved against its directory
		"full",  // the environment over the file
		"never", // an empty variable is unset: the file
		"none",  // the flag over the file
		filepath.Join(dir, "etc", "bundles"),
	}
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	// The flag over the environment over the file, for one key.
	env["TRACECTL_KEY"] = "env.pem"
	if o, err = parseWrapWith(t, "server"); err != nil || o.key != "env.pem" {
		t.Errorf("environment over file: %v %+v", err, o)
	}
	if o, err = parseWrapWith(t, "--key", "flag.pem", "server"); err != nil || o.key != "flag.pem" {
		t.Errorf("flag over environment: %v %+v", err, o)
	}
	// --bundle: bundle-dir from the file does not apply.
	if o, err = parseWrapWith(t, "--bundle", "one.trace", "server"); err != nil || o.bundleDir != "" {
		t.Errorf("--bundle with bundle-dir in the file: %v %+v", err, o)
	}

	// The default locations.
	xdg, home := filepath.Join(dir, "xdg"), filepath.Join(dir, "home")
	writeFile(t, filepath.Join(xdg, "tracectl", "config.yaml"), "retain: digest\n")
	writeFile(t, filepath.Join(home, ".config", "tracectl", "config.yaml"), "capture: always\n")
	withConfigEnv(t, map[string]string{"XDG_CONFIG_HOME": xdg}, home)
	if o, err = parseWrapWith(t, "server"); err != nil || o.retain != "digest" || o.capture != "auto" {
		t.Errorf("$XDG_CONFIG_HOME: %v %+v", err, o)
	}
	withConfigEnv(t, map[string]string{"XDG_CONFIG_HOME": "relative"}, home)
	if o, err = parseWrapWith(t, "server"); err != nil || o.retain != "full" || o.capture != "always" {
		t.Errorf("~/.config (a relative $XDG_CONFIG_HOME is ignored): %v %+v", err, o)
	}
	withConfigEnv(t, map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "none")}, filepath.Join(dir, "nohome"))
	if _, err = parseWrapWith(t, "server"); err != nil {
		t.Errorf("no default file: %v", err)
	}

	// Refusals: exit 2, naming the file and line, before wrap runs.
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "retain: full\n\nkye: k.pem\n")
	for _, tc := range []struct{ file, want string }{
		{bad, bad + `:3: unknown key "kye"`},
		{filepath.Join(dir, "missing.yaml"), "missing.yaml"},
		{dir, "not a regular file"},
	} {
		withConfigEnv(t, map[string]string{configEnv: tc.file}, "")
		o, err := parseWrapWith(t, "server")
		var ee *exitError
		if o != nil || !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want exit %d with %q", tc.file, err, exitUsage, tc.want)
		}
	}
	// A command that takes none of these flags does not read the file.
	var out bytes.Buffer
	if code := run([]string{"canon", "--digest", bad}, strings.NewReader(""), &out, &out); code == exitUsage && strings.Contains(out.String(), "unknown key") {
		t.Errorf("canon read the config file:\n%s", out.String())
	}
}

// FuzzParseConfig: whatever the bytes, parseConfig either refuses them
// with a *configError naming the file, or returns known keys with
// non-empty values, which, written back as YAML and parsed again, are the
// same (relative paths are resolved once).
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"", "# c\n", "{}", "key: a.pem\nretain: digest\n", "key: awskms:///x\ntrusted-key: /k.pub\nbundle-dir: ../b\n",
		"capture: never\ndurability: none\n", "kye: x\n", "key: a\nkey: b\n", "key: [a]\n", "- a\n", "key: &a x\nretain: *a\n",
		"key: a\n---\nb: c\n", "key: 'a\n", "retain: 5\n", "\tkey: a\n", "? [a]\n: b\n", "<<: {key: a}\n",
		"key: \"\\xff\\x00\\u200b\\e\"\n", "key: \"a\\nb\"\nbundle-dir: \"null\"\n", "key: !!str 5\n", "key: !custom x\n", "\xff: a\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseConfig("c.yaml", dir, data)
		if err != nil {
			var ce *configError
			if !errors.As(err, &ce) || ce.File != "c.yaml" || ce.Line < 0 {
				t.Fatalf("%q: %v is not a *configError naming the file", data, err)
			}
			return
		}
		m := map[string]string{}
		for k, v := range cfg.values {
			if _, ok := configKeys[k]; !ok || v.value == "" || v.line < 1 {
				t.Fatalf("%q: %s = %+v", data, k, v)
			}
			m[k] = v.value
		}
		b, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseConfig("c.yaml", dir, b)
		if err != nil {
			t.Fatalf("%q re-encoded as %q: %v", data, b, err)
		}
		for k, v := range again.values {
			if m[k] != v.value {
				t.Fatalf("%q re-encoded as %q: %s = %q, was %q", data, b, k, v.value, m[k])
			}
		}
		if len(again.values) != len(m) {
			t.Fatalf("%q re-encoded as %q: %d keys, was %d", data, b, len(again.values), len(m))
		}
	})
}

// TestREADMEConfig: the README's config file example parses, with its
// relative key resolved against the file's directory.
func TestREADMEConfig(t *testing.T) {
	block := readmeBlock(t, "## Commands", "yaml")
	dir := t.TempDir()
	cfg, err := parseConfig("config.yaml", dir, []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.values["key"].value, filepath.Join(dir, "keys", "agent.pem"); got != want || len(cfg.values) != 3 {
		t.Errorf("key %q, want %q; %d keys", got, want, len(cfg.values))
	}
}
