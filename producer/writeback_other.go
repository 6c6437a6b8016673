//go:build !linux

package producer

// startWriteback does nothing where there is no way to start writeback
// without waiting for it.
func startWriteback(File) {}
