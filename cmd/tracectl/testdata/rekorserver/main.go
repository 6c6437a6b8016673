// Command rekorserver is rekor-tiles v2.3.0's own POSIX server
// (cmd/rekor-server/posix), built by cmd/tracectl's TestRekorTilesServer in
// this separate module so that none of the server's dependencies enter
// tracectl's go.mod or binary.
package main

import "github.com/sigstore/rekor-tiles/v2/cmd/rekor-server/posix/app"

func main() { app.Execute() }
