package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// buildInfo parses build information as `go version -m` prints it.
func buildInfo(t *testing.T, lines ...string) *debug.BuildInfo {
	t.Helper()
	bi, err := debug.ParseBuildInfo(strings.Join(lines, "\n") + "\n")
	if err != nil {
		t.Fatal(err)
	}
	return bi
}

// TestBuildVersion: what `tracectl version` prints for a release build, a
// modified clone, a build without VCS stamping and a binary without build
// information, in text and JSON, and the producer version bundles carry.
func TestBuildVersion(t *testing.T) {
	const rev = "c819cbe0a1b2c3d4e5f60718293a4b5c6d7e8f90"
	for _, tt := range []struct {
		name      string
		bi        *debug.BuildInfo
		ok        bool
		text      string
		json      string
		short     string
		wantDirty *bool
	}{{
		name: "release",
		bi: buildInfo(t, "go\tgo1.26.8", "path\tgithub.com/tracectl/tracectl/cmd/tracectl",
			"mod\tgithub.com/tracectl/tracectl\tv0.1.0\th1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
			"build\tGOOS=darwin", "build\tGOARCH=arm64", "build\tvcs=git", "build\tvcs.revision="+rev,
			"build\tvcs.time=2026-12-02T13:05:36Z", "build\tvcs.modified=false"),
		ok: true,
		text: "tracectl v0.1.0\nmodule:   github.com/tracectl/tracectl\nrevision: " + rev + " (2026-12-02T13:05:36Z)\n" +
			"go:       go1.26.8 darwin/arm64\n",
		json: `{"media_type":"application/vnd.tracectl.version.v1+json","module":"github.com/tracectl/tracectl","version":"v0.1.0",` +
			`"vcs_revision":"` + rev + `","vcs_time":"2026-12-02T13:05:36Z","vcs_modified":false,"go_version":"go1.26.8","platform":"darwin/arm64"}`,
		short: "v0.1.0 " + rev,
	}, {
		name: "modified clone",
		bi: buildInfo(t, "go\tgo1.26.8", "path\tgithub.com/tracectl/tracectl/cmd/tracectl",
			"mod\tgithub.com/tracectl/tracectl\t(devel)\t", "build\tGOOS=linux", "build\tGOARCH=amd64",
			"build\tvcs=git", "build\tvcs.revision="+rev, "build\tvcs.time=2026-12-02T13:05:36Z", "build\tvcs.modified=true"),
		ok: true,
		text: "tracectl (devel)\nmodule:   github.com/tracectl/tracectl\nrevision: " + rev + " (2026-12-02T13:05:36Z), modified\n" +
			"go:       go1.26.8 linux/amd64\n",
		json: `{"media_type":"application/vnd.tracectl.version.v1+json","module":"github.com/tracectl/tracectl","version":"(devel)",` +
			`"vcs_revision":"` + rev + `","vcs_time":"2026-12-02T13:05:36Z","vcs_modified":true,"go_version":"go1.26.8","platform":"linux/amd64"}`,
		short: "(devel) " + rev + "+dirty",
	}, {
		name: "no vcs stamping",
		bi: buildInfo(t, "go\tgo1.26.8", "path\tgithub.com/tracectl/tracectl/cmd/tracectl",
			"mod\tgithub.com/tracectl/tracectl\t(devel)\t", "build\tGOOS=windows", "build\tGOARCH=amd64"),
		ok:   true,
		text: "tracectl (devel)\nmodule:   github.com/tracectl/tracectl\nrevision: unknown (built without VCS stamping)\ngo:       go1.26.8 windows/amd64\n",
		json: `{"media_type":"application/vnd.tracectl.version.v1+json","module":"github.com/tracectl/tracectl","version":"(devel)",` +
			`"go_version":"go1.26.8","platform":"windows/amd64"}`,
		short: "(devel)",
	}, {
		name: "no build information",
		ok:   false,
		text: "tracectl (unknown)\nmodule:   (unknown)\nrevision: unknown (built without VCS stamping)\ngo:       " +
			runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n",
		json: `{"media_type":"application/vnd.tracectl.version.v1+json","module":"(unknown)","version":"(unknown)",` +
			`"go_version":"` + runtime.Version() + `","platform":"` + runtime.GOOS + "/" + runtime.GOARCH + `"}`,
		short: "(unknown)",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			v := buildVersionOf(tt.bi, tt.ok)
			var text bytes.Buffer
			if err := v.writeText(&text); err != nil {
				t.Fatal(err)
			}
			if got := text.String(); got != tt.text {
				t.Errorf("text:\ngot  %q\nwant %q", got, tt.text)
			}
			got, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.json {
				t.Errorf("json:\ngot  %s\nwant %s", got, tt.json)
			}
			if got := v.short(); got != tt.short {
				t.Errorf("short %q, want %q", got, tt.short)
			}
		})
	}
}

// TestVersionFlags: the command's flags reach its options; arguments and
// unknown formats are usage errors.
func TestVersionFlags(t *testing.T) {
	var got *versionOptions
	cmd := newVersionCmd(streams{}, func(_ streams, o *versionOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--format", "json"})
	if err := cmd.Execute(); err != nil || got == nil || got.format != "json" {
		t.Fatalf("err %v, options %+v", err, got)
	}
	cmd.SetArgs([]string{"extra"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil {
		t.Error("an argument was accepted")
	}
	if err := runVersion(streams{out: &bytes.Buffer{}}, &versionOptions{format: "yaml"}); exitCode(err, &bytes.Buffer{}) != exitUsage {
		t.Errorf("--format yaml: %v, want a usage error", err)
	}
}

// TestVersionBinary builds tracectl as a user would and checks that
// `tracectl version --format json` reports what the Go toolchain itself
// reads from the binary (`go version -m`): module version, VCS revision,
// time and modified flag (whatever this checkout stamps), Go version.
func TestVersionBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tracectl with the go command (seconds); skipped under -short")
	}
	bin := filepath.Join(t.TempDir(), "tracectl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build tracectl: %v\n%s", err, out)
	}
	mv, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	// "FILE: GOVERSION", then ParseBuildInfo's lines, each indented.
	first, rest, _ := strings.Cut(string(mv), "\n")
	_, goVersion, _ := strings.Cut(first, ": ")
	lines := []string{"go\t" + goVersion}
	for _, l := range strings.Split(rest, "\n") {
		if l = strings.TrimPrefix(l, "\t"); l != "" {
			lines = append(lines, l)
		}
	}
	want := buildVersionOf(buildInfo(t, lines...), true)
	out, err := exec.Command(bin, "version", "--format", "json").Output()
	if err != nil {
		t.Fatalf("tracectl version: %v", err)
	}
	var got buildVersion
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Module != "github.com/tracectl/tracectl" || got.Module != want.Module || got.Version != want.Version || got.Revision != want.Revision ||
		got.Time != want.Time || (got.Modified == nil) != (want.Modified == nil) ||
		(got.Modified != nil && *got.Modified != *want.Modified) || got.GoVersion != want.GoVersion || got.Platform != want.Platform {
		t.Errorf("tracectl version says %s\ngo version -m says %+v", out, want)
	}
}

// TestSpecNamesMediaTypes: spec/README.md's identifier table names every
// media type of the CLI's JSON outputs.
func TestSpecNamesMediaTypes(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("..", "..", "spec", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range []string{showMediaType, diffMediaType, versionMediaType} {
		if !bytes.Contains(spec, []byte("| `"+mt+"` |")) {
			t.Errorf("spec/README.md's identifier table lacks %s", mt)
		}
	}
}
