package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spf13/cobra"

	"github.com/tracectl/tracectl/sign"
	"github.com/tracectl/tracectl/transcript"
)

// maxConfigBytes bounds the config file: it holds a handful of keys, and a
// larger file is a mistake (or a hostile file) that must not be read whole.
const maxConfigBytes = 1 << 20

// configEnv names a config file to read instead of the default one; a file
// it names must exist.
const configEnv = "TRACECTL_CONFIG"

// configKeys are the keys a config file may hold: each defaults the flag
// of the same name, under its environment variable (envDefaults). path
// keys are resolved against the file's directory when relative; values,
// when set, is the closed list a value must be in.
var configKeys = map[string]struct {
	path   bool
	values []string
}{
	"key":         {path: true},
	"trusted-key": {path: true},
	"bundle-dir":  {path: true},
	"retain":      {values: []string{transcript.RetainFull, transcript.RetainDigest}},
	"durability":  {values: []string{transcript.DurabilityStrict, transcript.DurabilityBatch, transcript.DurabilityNone}},
	"capture":     {values: []string{"auto", "always", "never"}},
}

// Config file errors; each comes wrapped in a *configError naming the file
// and the line.
var (
	errConfigSyntax     = errors.New("invalid YAML")
	errConfigNotMapping = errors.New("not a YAML mapping")
	errConfigUnknownKey = errors.New("unknown key")
	errConfigDuplicate  = errors.New("duplicate key")
	errConfigType       = errors.New("wrong type")
	errConfigValue      = errors.New("invalid value")
	errConfigTooLarge   = errors.New("config file too large")
)

// configError is a config file that cannot be used, with where.
type configError struct {
	File string
	Line int // 0: the file as a whole
	Err  error
}

func (e *configError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *configError) Unwrap() error { return e.Err }

// configValue is one key's value in a config file and its line.
type configValue struct {
	value string
	line  int
}

// config is a parsed config file.
type config struct {
	file   string
	values map[string]configValue
}

// yamlLine finds the line in a YAML syntax error, which the library only
// gives as text.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseConfig parses a config file's bytes: one YAML mapping (or nothing
// at all) of known keys to strings, each key once. name is the file, for
// errors, and dir the directory relative paths resolve against.
func parseConfig(name, dir string, data []byte) (*config, error) {
	cfg := &config{file: name, values: map[string]configValue{}}
	fail := func(line int, err error) (*config, error) {
		return nil, &configError{File: name, Line: line, Err: err}
	}
	if len(data) > maxConfigBytes {
		return fail(0, fmt.Errorf("%w: longer than %d bytes", errConfigTooLarge, maxConfigBytes))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return cfg, nil // empty, or comments only
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 0
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		return fail(line, fmt.Errorf("%w: %s", errConfigSyntax, msg))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return fail(next.Line, fmt.Errorf("%w: more than one YAML document", errConfigSyntax))
	}
	if len(doc.Content) == 0 {
		return cfg, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fail(root.Line, errConfigNotMapping)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return fail(k.Line, fmt.Errorf("%w: a key must be a string", errConfigType))
		}
		spec, ok := configKeys[k.Value]
		if !ok {
			return fail(k.Line, fmt.Errorf("%w %q (known: %s)", errConfigUnknownKey, k.Value, strings.Join(configKeyNames(), ", ")))
		}
		if prev, dup := cfg.values[k.Value]; dup {
			return fail(k.Line, fmt.Errorf("%w %q (first at line %d)", errConfigDuplicate, k.Value, prev.line))
		}
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			quote := ""
			if v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
				quote = " (quote it)"
			}
			return fail(k.Line, fmt.Errorf("%w: %s: want a string, not %s%s", errConfigType, k.Value, yamlKind(v), quote))
		}
		val := v.Value
		switch {
		case val == "":
			return fail(k.Line, fmt.Errorf("%w: %s: empty (leave the key out)", errConfigValue, k.Value))
		case spec.values != nil && !slices.Contains(spec.values, val):
			return fail(k.Line, fmt.Errorf("%w: %s %q: want %s", errConfigValue, k.Value, val, strings.Join(spec.values, ", ")))
		case spec.path && !filepath.IsAbs(val) && !(k.Value == "key" && sign.IsKMSRef(val)):
			val = filepath.Join(dir, val)
		}
		cfg.values[k.Value] = configValue{value: val, line: k.Line}
	}
	return cfg, nil
}

// yamlKind names what a value that is not a string is.
func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return strings.TrimPrefix(n.Tag, "!!")
}

func configKeyNames() []string {
	var names []string
	for k := range configKeys {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// userHomeDir is the home directory the default config file is under (a
// test's own, in tests).
var userHomeDir = os.UserHomeDir

// configPath is the config file to read: $TRACECTL_CONFIG (required to
// exist), else $XDG_CONFIG_HOME/tracectl/config.yaml, else
// ~/.config/tracectl/config.yaml; "" when there is no home to look in.
func configPath() (path string, required bool) {
	if p, ok := lookupEnv(configEnv); ok && p != "" {
		return p, true
	}
	// The XDG base directory spec: a relative value is to be ignored.
	if d, ok := lookupEnv("XDG_CONFIG_HOME"); ok && filepath.IsAbs(d) {
		return filepath.Join(d, "tracectl", "config.yaml"), false
	}
	home, err := userHomeDir()
	if err != nil || home == "" {
		return "", false
	}
	return filepath.Join(home, ".config", "tracectl", "config.yaml"), false
}

// loadConfig reads the config file, if any: nil and no error when the
// default file does not exist. Only a regular file is read (a FIFO would
// block, a device never end).
func loadConfig() (*config, error) {
	path, required := configPath()
	if path == "" {
		return nil, nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !required:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("config file: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("config file %s: not a regular file", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	// One byte more than the limit, so parseConfig sees a file too large.
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return parseConfig(path, filepath.Dir(abs), data)
}

// configHelp is the text of `tracectl help config`.
const configHelp = `Flags a launch line would repeat can default from a config file, so an MCP
client's configuration need not name them.

The file is $TRACECTL_CONFIG if set (it must then exist), else
$XDG_CONFIG_HOME/tracectl/config.yaml, else ~/.config/tracectl/config.yaml (a
missing default file is fine). It is one YAML mapping of these keys, spelled
as the flags, each a string:

  key: keys/agent.pem                  # --key (a PEM file or a KMS reference)
  trusted-key: keys/agent.pem.pub      # --trusted-key
  bundle-dir: /var/log/agent/bundles   # --bundle-dir (not with --bundle)
  retain: digest                       # --retain: full or digest
  durability: batch                    # --durability: strict, batch or none
  capture: auto                        # --capture: auto, always or never

Relative paths (key, trusted-key, bundle-dir) are resolved against the
directory the file is in, not the working directory.

Precedence: a flag given wins over its environment variable (TRACECTL_KEY,
TRACECTL_TRUSTED_KEY, TRACECTL_BUNDLE_DIR, TRACECTL_RETAIN,
TRACECTL_DURABILITY, TRACECTL_CAPTURE; empty is unset), which wins over the
file. A command reads the file only when it takes one of these flags.

Parsing is strict: an unknown or duplicate key, a value that is not a string
(or not one of the listed values), a file that is not a YAML mapping or is
larger than 1 MiB is an error naming the file and line, and the command exits
2 before it starts anything.`

func init() {
	commands = append(commands, func(streams) *cobra.Command {
		// No Run: a help topic, as exit-codes.
		return &cobra.Command{Use: "config", Short: "The config file: defaults for --key, --bundle-dir and the like", Long: configHelp}
	})
}
