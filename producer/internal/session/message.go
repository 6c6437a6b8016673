package session

import (
	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

// str returns a string member of an object value.
func str(v canon.Value, name string) (string, bool) {
	if !v.Valid() {
		return "", false
	}
	m, ok := v.Get(name)
	if !ok {
		return "", false
	}
	return m.Str()
}

// progressToken returns the key (mcpwire.Key: by value) of a request's
// params._meta.progressToken, or "".
func progressToken(params canon.Value) string {
	if !params.Valid() {
		return ""
	}
	meta, ok := params.Get("_meta")
	if !ok {
		return ""
	}
	if tok, ok := meta.Get(mcpwire.MetaProgressToken); ok {
		return mcpwire.Key(tok)
	}
	return ""
}

// notificationToken returns the key of a progress notification's
// params.progressToken, or "": a server that re-encodes the token still
// names the same call.
func notificationToken(params canon.Value) string {
	if !params.Valid() {
		return ""
	}
	if tok, ok := params.Get("progressToken"); ok {
		return mcpwire.Key(tok)
	}
	return ""
}

func initializeInfo(result canon.Value) (version, name, ver string) {
	version, _ = str(result, "protocolVersion")
	if si, ok := result.Get("serverInfo"); ok {
		name, _ = str(si, "name")
		ver, _ = str(si, "version")
	}
	return
}

func discoverInfo(result canon.Value) (name, ver string) {
	if meta, ok := result.Get("_meta"); ok {
		if si, ok := meta.Get(mcpwire.MetaServerInfo); ok {
			name, _ = str(si, "name")
			ver, _ = str(si, "version")
		}
	}
	return
}
