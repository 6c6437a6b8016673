//go:build tools

// Package internal pins the module's dependencies while the packages that use
// them are being written, so `go mod tidy` keeps them.
package internal

import (
	_ "github.com/cockroachdb/apd/v3"
	_ "github.com/gowebpki/jcs"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/sigstore/sigstore/pkg/cryptoutils"
	_ "github.com/sigstore/sigstore/pkg/signature"
	_ "github.com/sigstore/sigstore/pkg/signature/kms"
	_ "github.com/sigstore/sigstore/pkg/signature/kms/cliplugin"
	_ "github.com/sigstore/sigstore/pkg/signature/kms/fake"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/mod/sumdb/tlog"
	_ "golang.org/x/term"
)
