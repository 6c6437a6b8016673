// Package launch recognizes the usual launchers (npx, uvx, node, python,
// docker run, ...) on a server command line, for tracectl wrap: npx
// @scope/pkg is not the server /usr/bin/npx. What it returns is a producer
// observation (what the command line and the launcher's own files said),
// not an authenticated identity; members that could not be observed are
// empty. wrap commits it in the header (transcript.Server.Launch).
package launch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

// Env is what Describe may read besides the file system: the
// working directory (relative scripts) and the environment (the npm cache).
type Env struct {
	Dir    string
	Getenv func(string) string
}

// Describe recognizes the usual launchers by the executable's base
// name and reads what they start from args. It returns nil for anything
// else. It reads files through fsys only: the script's bytes, and the npx
// cache's package.json files.
func Describe(fsys producer.FS, executable string, args []string, env Env) *transcript.Launch {
	if fsys == nil {
		fsys = producer.OS
	}
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	base := strings.TrimSuffix(filepath.Base(executable), ".exe")
	switch {
	case base == "npx":
		spec := firstOperand(args, npxValueFlags, "--package", "-p")
		if spec == "" {
			return &transcript.Launch{Launcher: "npx"}
		}
		return &transcript.Launch{Launcher: "npx", Package: spec, Version: npxCachedVersion(fsys, spec, env)}
	case base == "bunx":
		return &transcript.Launch{Launcher: "bunx", Package: firstOperand(args, nil, "--package", "-p")}
	case base == "pnpm" && len(args) > 0 && args[0] == "dlx":
		return &transcript.Launch{Launcher: "pnpm dlx", Package: firstOperand(args[1:], nil, "--package")}
	case base == "uvx":
		return &transcript.Launch{Launcher: "uvx", Package: firstOperand(args, uvValueFlags, "--from")}
	case base == "pipx" && len(args) > 0 && args[0] == "run":
		return &transcript.Launch{Launcher: "pipx run", Package: firstOperand(args[1:], nil, "--spec")}
	case base == "node" || base == "deno" || base == "bun" && len(args) > 0 && args[0] != "x":
		a := args
		if base == "deno" && len(a) > 0 && a[0] == "run" {
			a = a[1:]
		}
		if hasFlagBefore(a, nodeValueFlags, "-e", "--eval", "-p", "--print") {
			return &transcript.Launch{Launcher: base} // code on the command line, no script
		}
		return scriptLaunch(fsys, base, firstOperand(a, nodeValueFlags), env)
	case strings.HasPrefix(base, "python"):
		for i, a := range args {
			if a == "-m" && i+1 < len(args) {
				return &transcript.Launch{Launcher: "python", Package: args[i+1]}
			}
		}
		if hasFlagBefore(args, pythonValueFlags, "-c") {
			return &transcript.Launch{Launcher: "python"}
		}
		return scriptLaunch(fsys, "python", firstOperand(args, pythonValueFlags), env)
	case (base == "docker" || base == "podman") && len(args) > 0 && args[0] == "run":
		return &transcript.Launch{Launcher: base + " run", Image: firstOperand(args[1:], dockerValueFlags)}
	}
	return nil
}

// Flags of each launcher that take the next argument as their value, so
// that value is not taken for what is launched.
var (
	npxValueFlags    = []string{"--package", "-p", "--call", "-c", "--cache", "--userconfig", "--registry"}
	uvValueFlags     = []string{"--from", "--with", "--python", "-p", "--index", "--index-url", "--extra-index-url"}
	nodeValueFlags   = []string{"-r", "--require", "--import", "--loader", "--env-file", "--config", "-c"}
	pythonValueFlags = []string{"-W", "-X"}
	dockerValueFlags = []string{"-e", "--env", "--env-file", "-v", "--volume", "--mount", "-p", "--publish", "--name",
		"--network", "--net", "-w", "--workdir", "-u", "--user", "--entrypoint", "-l", "--label", "--platform",
		"--pull", "--cpus", "-m", "--memory", "--add-host", "--device", "--cap-add", "--cap-drop", "-h", "--hostname",
		"--restart", "--runtime", "--security-opt", "--ulimit", "--log-driver", "--log-opt", "--dns", "--tmpfs"}
)

// firstOperand is the first argument that is not a flag (nor a flag's
// value), unless one of specFlags names the package explicitly: then its
// value. "--" ends the flags.
func firstOperand(args, valueFlags []string, specFlags ...string) string {
	var operand string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if operand == "" && i+1 < len(args) {
				operand = args[i+1]
			}
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if operand == "" {
				operand = a
			}
			break
		}
		name, value, hasValue := strings.Cut(a, "=")
		if slices.Contains(specFlags, name) {
			if hasValue {
				return value
			}
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
		if !hasValue && (slices.Contains(valueFlags, name) || slices.Contains(specFlags, name)) {
			i++
		}
	}
	return operand
}

// hasFlagBefore reports whether one of flags comes before the first
// operand.
func hasFlagBefore(args, valueFlags []string, flags ...string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return false
		}
		name, _, hasValue := strings.Cut(a, "=")
		if slices.Contains(flags, name) {
			return true
		}
		if !hasValue && slices.Contains(valueFlags, name) {
			i++
		}
	}
	return false
}

func scriptLaunch(fsys producer.FS, launcher, script string, env Env) *transcript.Launch {
	l := &transcript.Launch{Launcher: launcher}
	if script == "" {
		return l
	}
	if !filepath.IsAbs(script) && env.Dir != "" {
		script = filepath.Join(env.Dir, script)
	}
	l.Script = script
	if d, err := fileSHA256(fsys, script); err == nil {
		l.ScriptSHA256 = d
	}
	return l
}

func fileSHA256(fsys producer.FS, path string) (string, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// maxLaunchManifest bounds a package.json read to find a version.
const maxLaunchManifest = 1 << 20

// npxCachedVersion is the version npx installed for spec, as its cache
// (<npm cache>/_npx/<key>/node_modules/<name>/package.json) shows it; ""
// when the cache holds none, or versions that disagree.
func npxCachedVersion(fsys producer.FS, spec string, env Env) string {
	name := packageName(spec)
	cache := env.Getenv("npm_config_cache")
	if cache == "" {
		home := env.Getenv("HOME")
		if home == "" {
			return ""
		}
		cache = filepath.Join(home, ".npm")
	}
	ents, err := fsys.ReadDir(filepath.Join(cache, "_npx"))
	if err != nil {
		return ""
	}
	found := ""
	for _, e := range ents {
		v := manifestVersion(fsys, filepath.Join(cache, "_npx", e.Name(), "node_modules", filepath.FromSlash(name), "package.json"))
		if v == "" {
			continue
		}
		if found != "" && found != v {
			return "" // two cached versions: the files do not say which one runs
		}
		found = v
	}
	if want := specVersion(spec); want != "" && found != "" && want != found && !strings.ContainsAny(want, "^~<>=*x ") && want != "latest" {
		return "" // pinned to another version than the one cached
	}
	return found
}

func manifestVersion(fsys producer.FS, path string) string {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLaunchManifest))
	if err != nil {
		return ""
	}
	var m struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &m) != nil || !utf8.ValidString(m.Version) || len(m.Version) > 256 {
		return ""
	}
	return m.Version
}

// packageName is the npm package name of a spec: @scope/name@range ->
// @scope/name.
func packageName(spec string) string {
	if strings.HasPrefix(spec, "@") {
		if i := strings.Index(spec[1:], "@"); i >= 0 {
			return spec[:i+1]
		}
		return spec
	}
	name, _, _ := strings.Cut(spec, "@")
	return name
}

func specVersion(spec string) string {
	name := packageName(spec)
	return strings.TrimPrefix(spec[len(name):], "@")
}
