# The tracectl container image: distroless (no shell, no package manager),
# non-root, tracectl as the entrypoint:
#   docker run --rm -v "$PWD:/work" -w /work ghcr.io/tracectl/tracectl verify --trusted-key key.pem.pub run.trace
# It copies a tracectl built beforehand, it builds nothing: GoReleaser
# (dockers_v2 in .goreleaser.yaml) puts the release's own linux binaries,
# the ones checksums.txt lists and cosign signs, at PLATFORM/tracectl in the
# build context. From a clone, without GoReleaser:
#   ctx=$(mktemp -d)
#   CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -o "$ctx/linux/amd64/tracectl" ./cmd/tracectl
#   docker build --platform linux/amd64 -f Dockerfile -t tracectl "$ctx"
# .ci/run cross-compiles those binaries on every run (TestReleaseConfig).
# `tracectl wrap` needs the server's command inside the image, which this one
# does not have: use it for verify, show, export, report and proxy.
FROM gcr.io/distroless/static-debian12:nonroot
ARG TARGETPLATFORM
COPY ${TARGETPLATFORM}/tracectl /usr/local/bin/tracectl
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/tracectl"]
