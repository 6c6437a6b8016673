package producer

import (
	"fmt"
	"net/url"

	"github.com/tracectl/tracectl/transcript"
)

// HTTPServer describes a Streamable HTTP MCP server as the producer is told
// it: its endpoint URL without userinfo or query (either may hold a
// credential), and the operator's label. It is not an authenticated
// identity; over TLS the certificate observed is recorded per connection
// (RecordHTTP, transcript.HTTPUpstream).
func HTTPServer(endpoint *url.URL, name string) (transcript.Server, error) {
	if endpoint == nil || endpoint.Host == "" || (endpoint.Scheme != "http" && endpoint.Scheme != "https") {
		return transcript.Server{}, fmt.Errorf("%w: the upstream must be an http or https URL with a host", ErrInvalidOptions)
	}
	u := url.URL{Scheme: endpoint.Scheme, Host: endpoint.Host, Path: endpoint.Path, RawPath: endpoint.RawPath}
	s := transcript.Server{Transport: transcript.TransportHTTP, URL: u.String(), Name: name}
	if len(s.URL) > transcript.MaxPathBytes || len(name) > transcript.MaxReportedBytes {
		return transcript.Server{}, fmt.Errorf("%w: upstream URL or server name too long", ErrInvalidOptions)
	}
	return s, nil
}

// RecordHTTP records an HTTP line (spec/http.md). Like a frame line it is
// written, ordered before anything forwarded after it returns, and made
// durable with the next group commit. Seq and AtMs are set by the
// recorder; Type is set to "http".
func (r *Recorder) RecordHTTP(ev transcript.HTTPEvent) error {
	if err := r.begin(true); err != nil {
		return err
	}
	defer r.ops.Done()
	if ev.Detail != "" {
		ev.Detail = transcript.Detail(ev.Detail)
	}
	// Checked before it takes a seq: a line the format refuses (a
	// credential header's value, say) is the caller's error, never a hole
	// in the journal.
	probe := ev
	probe.Seq = 1
	if line, err := transcript.Encode(&probe); err != nil {
		return fmt.Errorf("%w: http line: %w", ErrInvalidInput, err)
	} else if len(line) > transcript.MaxLineBytes {
		return fmt.Errorf("%w: http line: %d bytes, over transcript.MaxLineBytes", ErrInvalidInput, len(line))
	} else if err := probe.Check(); err != nil {
		return fmt.Errorf("%w: http line: %w", ErrInvalidInput, err)
	}
	_, err := r.j.appendWritten(r.lineOf(func(s, at int64) { ev.Seq, ev.AtMs = s, at }, &ev))
	return err
}
