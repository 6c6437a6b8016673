package verify

import (
	"fmt"

	"github.com/tracectl/tracectl/transcript"
)

// httpCheck follows the HTTP lines of a Streamable HTTP transcript
// (spec/http.md).
type httpCheck struct {
	lines     int64
	refused   map[int64]string // client frame index -> header rule, from refused lines
	upstreams []string         // distinct identities observed, in order
	seen      map[string]bool
	creds     int64 // requests that carried credential headers (names only)
	// peerRefused counts requests refused before their bodies were read
	// (Host, Origin, body budget): no frame, never forwarded.
	peerRefused int64
}

// onHTTP checks an HTTP line against the header and records what it says.
// The format itself refuses a credential header's value (transcript
// validation); here the line's place is judged.
func (b *bundleCheck) onHTTP(idx int64, e *transcript.HTTPEvent) {
	h := &b.http
	h.lines++
	if b.header != nil && b.header.Server.Transport != transcript.TransportHTTP {
		b.malformed(idx, transcript.CodeInvalidMember, "an http line in a transcript whose server transport is "+boundedQuote(b.header.Server.Transport))
		return
	}
	switch e.Event {
	case transcript.HTTPWithheld:
		if b.header != nil && b.header.Format != transcript.Format {
			b.malformed(idx, transcript.CodeInvalidMember, "an http withheld line in a transcript before "+transcript.Format+", which never withholds for framing")
		}
	case transcript.HTTPRefused:
		if e.Frame == nil {
			// Refused before its body was read (its Host or Origin, the
			// producer's body budget): no frame to excuse.
			h.peerRefused++
			break
		}
		if h.refused == nil {
			h.refused = map[int64]string{}
		}
		h.refused[*e.Frame] = e.Rule
	case transcript.HTTPUpstream:
		id := "url " + boundedQuote(e.URL)
		if e.TLS != nil {
			id += fmt.Sprintf(", %s, leaf SPKI %s, chain %s (%d certificates)", e.TLS.Version, e.TLS.SPKISHA256, e.TLS.Chain, e.TLS.ChainLen)
		}
		if h.seen == nil {
			h.seen = map[string]bool{}
		}
		if !h.seen[id] {
			h.seen[id] = true
			h.upstreams = append(h.upstreams, id)
		}
	case transcript.HTTPRequest:
		if len(e.Credentials) > 0 {
			h.creds++
		}
	}
}

// headerRefused reports whether a refused client frame was refused for its
// HTTP headers by the line before it: the gate read its bytes (so it is a
// request or notification, a tools/call even) and refused the headers that
// disagree with them. It is committed, never forwarded, and no attempt.
func (b *bundleCheck) headerRefused(f *transcript.Frame) bool {
	if f.Direction != transcript.ClientToServer || f.Disposition != transcript.FrameRefused || f.Kind == transcript.FrameUnread {
		return false
	}
	if b.header == nil || b.header.Server.Transport != transcript.TransportHTTP {
		return false
	}
	_, ok := b.http.refused[f.Index]
	return ok
}

func (b *bundleCheck) finishHTTP() {
	h := &b.http
	if h.lines == 0 {
		return
	}
	for _, u := range h.upstreams {
		b.r.add(CodeProducerObservation, checkOutcome, StatusInfo, "upstream",
			"the HTTP upstream as the producer observed it: "+u)
	}
	if n := int64(len(h.refused)); n > 0 {
		b.r.add(CodeFramesRefused, checkTranscript, StatusInfo, "http",
			fmt.Sprintf("%d client requests refused for routing headers missing or disagreeing with their bodies: committed, answered with an error, never forwarded", n))
	}
	if h.peerRefused > 0 {
		b.r.add(CodeProducerObservation, checkOutcome, StatusInfo, "http",
			fmt.Sprintf("%d requests refused before their bodies were read (Host, Origin, or the proxy's in-flight body budget): never forwarded", h.peerRefused))
	}
	if h.creds > 0 {
		b.r.add(CodeProducerObservation, checkOutcome, StatusInfo, "http",
			fmt.Sprintf("%d requests carried credential headers: their presence is recorded, never their values", h.creds))
	}
}
