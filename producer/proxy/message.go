package proxy

import (
	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/mcpwire"
)

// MCP _meta keys the proxy reads (mcpwire holds the vocabulary).
const (
	MetaProtocolVersion = mcpwire.MetaProtocolVersion
	MetaServerInfo      = mcpwire.MetaServerInfo
	MetaCorrelationID   = mcpwire.MetaCorrelationID
	MetaRetryOf         = mcpwire.MetaRetryOf
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

// protocolState reads the per-request protocol revision of the modern era:
// present (a calendar-date string), absent, or malformed.
func protocolState(m *mcpwire.Message) (state, version string) {
	if !m.Params.Valid() {
		return "absent", ""
	}
	metaV, ok := m.Params.Get("_meta")
	if !ok {
		return "absent", ""
	}
	if metaV.Kind() != canon.KindObject {
		return "malformed", ""
	}
	pv, ok := metaV.Get(MetaProtocolVersion)
	if !ok {
		return "absent", ""
	}
	s, isStr := pv.Str()
	if !isStr || !mcpwire.IsRevision(s) {
		return "malformed", ""
	}
	return "present", s
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
		if si, ok := meta.Get(MetaServerInfo); ok {
			name, _ = str(si, "name")
			ver, _ = str(si, "version")
		}
	}
	return
}
