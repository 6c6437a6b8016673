package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// releaseFile reads a file of the repository root.
func releaseFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlList returns the flow-style list of the first `key: [a, b]` line.
func yamlList(t *testing.T, doc, key string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(key) + `: \[(.*)\]$`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf(".goreleaser.yaml has no %s: [...] line", key)
	}
	var out []string
	for _, v := range strings.Split(m[1], ",") {
		out = append(out, strings.TrimSpace(v))
	}
	return out
}

// TestReleaseConfig keeps the release definition from rotting apart: the
// targets .goreleaser.yaml builds are exactly the ones .ci/run
// cross-compiles on every run; the binary is cmd/tracectl; the checksums
// file is signed keyless (no key file) as a Sigstore bundle, and each
// archive has an SPDX SBOM; the Dockerfile is distroless, copies the
// binary GoReleaser puts at PLATFORM/tracectl and runs it as its
// entrypoint, for platforms that are release targets.
func TestReleaseConfig(t *testing.T) {
	gr := releaseFile(t, ".goreleaser.yaml")
	var targets []string
	for _, goos := range yamlList(t, gr, "goos") {
		for _, goarch := range yamlList(t, gr, "goarch") {
			targets = append(targets, goos+"/"+goarch)
		}
	}
	if len(targets) != 6 {
		t.Errorf("release targets %v, want linux, darwin and windows on amd64 and arm64", targets)
	}

	ci := releaseFile(t, ".ci/run")
	m := regexp.MustCompile(`(?m)^release_targets="([^"]*)"$`).FindStringSubmatch(ci)
	if m == nil {
		t.Fatal(`.ci/run has no release_targets="..." line`)
	}
	ciTargets := strings.Fields(m[1])
	if !slices.Equal(slices.Sorted(slices.Values(ciTargets)), slices.Sorted(slices.Values(targets))) {
		t.Errorf(".ci/run cross-compiles %v, .goreleaser.yaml releases %v", ciTargets, targets)
	}
	if !strings.Contains(ci, `GOOS=${target%/*} GOARCH=${target#*/} go build -trimpath -o /dev/null ./cmd/tracectl`) {
		t.Error(".ci/run no longer builds ./cmd/tracectl for each release target")
	}

	for _, want := range []string{
		"version: 2\n", "    main: ./cmd/tracectl\n", "    binary: tracectl\n", "      - CGO_ENABLED=0\n", "      - -trimpath\n", "      - -buildvcs=true\n",
		"checksum:\n  name_template: checksums.txt\n  algorithm: sha256\n",
		"sboms:\n", `"spdx-json=$document"`,
		"signs:\n", "    cmd: cosign\n    artifacts: checksum\n", `"sign-blob", "--bundle=${signature}", "${artifact}", "--yes"`,
		"docker_signs:\n", `["sign", "${artifact}@${digest}", "--yes"]`,
		"dockers_v2:\n", "    dockerfile: Dockerfile\n",
	} {
		if !strings.Contains(gr, want) {
			t.Errorf(".goreleaser.yaml lacks %q", want)
		}
	}
	if strings.Contains(gr, "--key") {
		t.Error(".goreleaser.yaml signs with a key file; releases are signed keyless")
	}
	for _, p := range yamlList(t, gr, "platforms") {
		if !slices.Contains(targets, p) || !strings.HasPrefix(p, "linux/") {
			t.Errorf("image platform %s is not a linux release target %v", p, targets)
		}
	}

	df := releaseFile(t, "Dockerfile")
	var from, copySrc, copyDst, entry []string
	for _, l := range strings.Split(df, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "FROM":
			from = append(from, f[1])
		case "COPY":
			copySrc, copyDst = append(copySrc, f[1]), append(copyDst, f[2])
		case "ENTRYPOINT":
			entry = append(entry, strings.Join(f[1:], " "))
		}
	}
	if len(from) != 1 || !strings.HasPrefix(from[0], "gcr.io/distroless/static") || !strings.HasSuffix(from[0], ":nonroot") {
		t.Errorf("Dockerfile FROM %v, want one distroless static nonroot stage", from)
	}
	if len(copySrc) != 1 || copySrc[0] != "${TARGETPLATFORM}/tracectl" || !strings.Contains(df, "\nARG TARGETPLATFORM\n") {
		t.Errorf("Dockerfile COPY %v, want ${TARGETPLATFORM}/tracectl (GoReleaser's layout, with ARG TARGETPLATFORM)", copySrc)
	}
	if len(entry) != 1 || len(copyDst) != 1 || entry[0] != `["`+copyDst[0]+`"]` {
		t.Errorf("Dockerfile ENTRYPOINT %v, want the copied %v", entry, copyDst)
	}
	if !strings.Contains(df, "\nUSER nonroot:nonroot\n") {
		t.Error("Dockerfile does not run as nonroot")
	}
}

// TestReleaseWorkflow: the workflow the README's "Verify a release" names
// exists and does what .goreleaser.yaml expects of it: it runs on v* tags
// only, holds an OIDC token (id-token: write) for keyless cosign and no
// key, installs cosign and syft (the signs and sboms sections call them),
// runs the tests first, and runs GoReleaser v2 with `release --clean`.
func TestReleaseWorkflow(t *testing.T) {
	wf := releaseFile(t, filepath.Join(".github", "workflows", "release.yml"))
	gr := releaseFile(t, ".goreleaser.yaml")
	for _, want := range []string{
		"tags: [\"v*\"]",
		"id-token: write",
		"contents: write",
		"packages: write",
		"uses: sigstore/cosign-installer@",
		"uses: anchore/sbom-action/download-syft@",
		"run: ./.ci/run",
		"uses: goreleaser/goreleaser-action@",
		`version: "~> v2"`,
		"args: release --clean",
		"fetch-depth: 0",
	} {
		if !strings.Contains(wf, want) {
			t.Errorf("release.yml lacks %q", want)
		}
	}
	if strings.Contains(wf, "COSIGN_PRIVATE_KEY") || strings.Contains(wf, "COSIGN_KEY") {
		t.Error("release.yml names a cosign key: the signature is keyless")
	}
	// What the workflow installs is what the configuration calls.
	for _, tool := range []string{"cmd: cosign", "syft"} {
		if !strings.Contains(gr, tool) {
			t.Errorf(".goreleaser.yaml no longer calls %q: update release.yml and this test", tool)
		}
	}
	if i, j := strings.Index(wf, "run: ./.ci/run"), strings.Index(wf, "goreleaser/goreleaser-action"); i < 0 || j < i {
		t.Error("release.yml must run the tests before GoReleaser")
	}
	if !strings.Contains(releaseFile(t, "README.md"), "^https://github\\.com/tracectl/tracectl/\\.github/workflows/") {
		t.Error("README.md's cosign identity no longer names this repository's workflows")
	}
}
