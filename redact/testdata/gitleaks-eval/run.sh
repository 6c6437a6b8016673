#!/usr/bin/env bash
# Reproduces the figures of redact/EVALUATION.md: gitleaks v8.30.1's detect
# package against tracectl's redact package on the same samples, the same
# false-positive corpus and the same 4 KiB tools/call. A separate module, so
# tracectl's go.mod never depends on gitleaks; samples are copied from
# redact/samples_test.go at run time.
set -euo pipefail
cd "$(dirname "$0")"
trap 'rm -f samples_test.go' EXIT
sed -e 's/^package redact/package gitleakseval/' -e 's/\bClass\b/redact.Class/g' \
  -e 's/\b\(Class[A-Z][A-Za-z]*\)/redact.\1/g' \
  -e 's#^import (#import (\n\t"github.com/tracectl/tracectl/redact"#' ../../samples_test.go > samples_test.go
go test -count=1 -v . 2>&1 | grep -v '^=== RUN\|^--- PASS'
go build -o /tmp/gitleakseval-gl ./cmd/gl && go build -o /tmp/gitleakseval-rd ./cmd/rd
ls -l /tmp/gitleakseval-gl /tmp/gitleakseval-rd | awk '{print $5, $9}'
echo "non-std packages: gitleaks/detect $(go list -deps -f '{{if not .Standard}}x{{end}}' ./cmd/gl | grep -c x), redact $(go list -deps -f '{{if not .Standard}}x{{end}}' ./cmd/rd | grep -c x)"
echo "modules: gitleaks/detect $(go list -deps -f '{{with .Module}}{{.Path}}{{end}}' ./cmd/gl | sort -u | grep -vc gitleakseval)"
rm -f /tmp/gitleakseval-gl /tmp/gitleakseval-rd
