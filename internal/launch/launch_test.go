package launch

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/producer"
	"github.com/tracectl/tracectl/transcript"
)

// TestDescribe: what each usual launcher's command line started.
func TestDescribe(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "server.js")
	if err := os.WriteFile(script, []byte("console.log(1)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scriptDigest := canon.SHA256([]byte("console.log(1)\n"))
	// An npx cache as npx leaves it: <cache>/_npx/<key>/node_modules/<name>/package.json.
	cache := filepath.Join(dir, "npm-cache")
	pkgDir := filepath.Join(cache, "_npx", "a1b2c3", "node_modules", "@modelcontextprotocol", "server-everything")
	if err := os.MkdirAll(pkgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkgDir, "package.json"), []byte(`{"name":"@modelcontextprotocol/server-everything","version":"2026.8.31"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := Env{Dir: dir, Getenv: func(k string) string {
		if k == "npm_config_cache" {
			return cache
		}
		return ""
	}}
	for _, tc := range []struct {
		exe  string
		args []string
		want *transcript.Launch
	}{
		{"/usr/bin/npx", []string{"-y", "@modelcontextprotocol/server-everything"}, &transcript.Launch{Launcher: "npx", Package: "@modelcontextprotocol/server-everything", Version: "2026.8.31"}},
		{"/usr/bin/npx", []string{"--yes", "@modelcontextprotocol/server-everything@latest", "stdio"}, &transcript.Launch{Launcher: "npx", Package: "@modelcontextprotocol/server-everything@latest", Version: "2026.8.31"}},
		{"/usr/bin/npx", []string{"-y", "@modelcontextprotocol/server-everything@1.0.0"}, &transcript.Launch{Launcher: "npx", Package: "@modelcontextprotocol/server-everything@1.0.0"}},
		{"/usr/bin/npx", []string{"-p", "some-pkg@2", "some-bin", "--flag"}, &transcript.Launch{Launcher: "npx", Package: "some-pkg@2"}},
		{"/usr/local/bin/bunx", []string{"mcp-server-fetch"}, &transcript.Launch{Launcher: "bunx", Package: "mcp-server-fetch"}},
		{"/usr/bin/pnpm", []string{"dlx", "@scope/srv@1.2.3"}, &transcript.Launch{Launcher: "pnpm dlx", Package: "@scope/srv@1.2.3"}},
		{"/usr/bin/uvx", []string{"mcp-server-git", "--repository", "."}, &transcript.Launch{Launcher: "uvx", Package: "mcp-server-git"}},
		{"/usr/bin/uvx", []string{"--from", "git+https://example.org/x", "x-server"}, &transcript.Launch{Launcher: "uvx", Package: "git+https://example.org/x"}},
		{"/usr/bin/pipx", []string{"run", "mcp-server-time"}, &transcript.Launch{Launcher: "pipx run", Package: "mcp-server-time"}},
		{"/usr/bin/node", []string{"--enable-source-maps", "server.js", "--port", "0"}, &transcript.Launch{Launcher: "node", Script: script, ScriptSHA256: scriptDigest}},
		{"/usr/bin/node", []string{"-r", "dotenv/config", script}, &transcript.Launch{Launcher: "node", Script: script, ScriptSHA256: scriptDigest}},
		{"/usr/bin/deno", []string{"run", "-A", "server.js"}, &transcript.Launch{Launcher: "deno", Script: script, ScriptSHA256: scriptDigest}},
		{"/usr/bin/node", []string{"-e", "require('x')", "server.js"}, &transcript.Launch{Launcher: "node"}},
		{"/usr/bin/python3", []string{"-c", "import x", "a.py"}, &transcript.Launch{Launcher: "python"}},
		{"/usr/bin/python3", []string{"-m", "mcp_server_time"}, &transcript.Launch{Launcher: "python", Package: "mcp_server_time"}},
		{"/usr/bin/python3", []string{"-u", "missing.py"}, &transcript.Launch{Launcher: "python", Script: filepath.Join(dir, "missing.py")}},
		{"/usr/bin/docker", []string{"run", "-i", "--rm", "-e", "TOKEN", "-v", "/a:/b", "ghcr.io/github/github-mcp-server:v1", "stdio"}, &transcript.Launch{Launcher: "docker run", Image: "ghcr.io/github/github-mcp-server:v1"}},
		{"/usr/bin/podman", []string{"run", "--env=X=1", "-i", "mcp/time"}, &transcript.Launch{Launcher: "podman run", Image: "mcp/time"}},
		{"/usr/bin/my-server", []string{"--stdio"}, nil},
		{"/usr/bin/docker", []string{"ps"}, nil},
	} {
		got := Describe(producer.OS, tc.exe, tc.args, env)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %q:\n got %+v\nwant %+v", filepath.Base(tc.exe), tc.args, got, tc.want)
		}
	}
}

// TestNpxCacheDisagreeing: two cached versions of one package: the files do
// not say which one runs, so no version is claimed.
func TestNpxCacheDisagreeing(t *testing.T) {
	cache := t.TempDir()
	for key, v := range map[string]string{"k1": "1.0.0", "k2": "2.0.0"} {
		d := filepath.Join(cache, "_npx", key, "node_modules", "srv")
		os.MkdirAll(d, 0o700)
		os.WriteFile(filepath.Join(d, "package.json"), []byte(`{"version":"`+v+`"}`), 0o600)
	}
	got := Describe(producer.OS, "npx", []string{"-y", "srv"}, Env{Getenv: func(k string) string {
		if k == "npm_config_cache" {
			return cache
		}
		return ""
	}})
	if got == nil || got.Version != "" || got.Package != "srv" {
		t.Errorf("got %+v, want package srv and no version", got)
	}
}
