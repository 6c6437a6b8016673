package vectors

import (
	"embed"
	"io/fs"
)

// The committed vectors travel inside the binary, so 'tracectl vectors run'
// needs no checkout.
//
//go:embed testdata/v1
var embedded embed.FS

// EmbeddedDir is the directory of the committed vectors, relative to this
// package.
const EmbeddedDir = "testdata/v1"

// Embedded returns the committed vectors (testdata/v1) as compiled into
// this package.
func Embedded() fs.FS {
	sub, err := fs.Sub(embedded, EmbeddedDir)
	if err != nil {
		panic(err) // the pattern above guarantees the directory
	}
	return sub
}
