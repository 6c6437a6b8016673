//go:build !linux

package main

import (
	"errors"
	"os"
)

// mapCanonInput maps files only on Linux, where a read lease keeps writers
// away while canon reads (see canon_map_linux.go); elsewhere the file is
// read.
func mapCanonInput(*os.File, int64) ([]byte, func() error, bool) { return nil, nil, false }

var errInputChanged = errors.New("the input file was written while canon read it; the output is not reliable")
