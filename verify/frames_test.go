package verify_test

import (
	"slices"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/mcpwire"
	"github.com/tracectl/tracectl/transcript"
	"github.com/tracectl/tracectl/verify"
)

func idx(i int64) *int64 { return &i }

// framed writes a proxy's session: a header with frames_committed, a
// forwarded ping (client frame 0), its response (server frame 0), one call
// (client frame 1) and its response (server frame 1). edit may change the
// events before they are written.
func framed(t *testing.T, committed bool, edit func(ping *transcript.Frame, a *transcript.Attempt, o *transcript.Observation)) *verifytest.Builder {
	return framedWith(t, committed, func(_ *verifytest.Builder, ping *transcript.Frame, a *transcript.Attempt, o *transcript.Observation) {
		edit(ping, a, o)
	})
}

func framedWith(t *testing.T, committed bool, edit func(b *verifytest.Builder, ping *transcript.Frame, a *transcript.Attempt, o *transcript.Observation)) *verifytest.Builder {
	b := verifytest.New(t)
	b.Header()
	if committed {
		h, err := transcript.DecodeLine(b.Lines[0])
		if err != nil {
			t.Fatal(err)
		}
		hh := h.(*transcript.Header)
		hh.FramesCommitted = true
		if b.Lines[0], err = canon.Marshal(hh); err != nil {
			t.Fatal(err)
		}
	}
	pingBytes := []byte(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	ping := &transcript.Frame{Direction: transcript.ClientToServer, Index: 0, Disposition: transcript.FrameForwarded,
		Kind: transcript.FrameRequest, Method: "ping", RPCID: &transcript.JSONRPCID{Present: true, Kind: transcript.IDString, Text: `"p"`},
		Payload: b.Blob(pingBytes), Terminator: mcpwire.TermLF}
	pong := &transcript.Frame{Direction: transcript.ServerToClient, Index: 0, Disposition: transcript.FrameForwarded,
		Kind: transcript.FrameResponse, RPCID: &transcript.JSONRPCID{Present: true, Kind: transcript.IDString, Text: `"p"`},
		Payload: b.Blob([]byte(`{"jsonrpc":"2.0","id":"p","result":{}}`)), Terminator: mcpwire.TermLF}
	var a *transcript.Attempt
	var o *transcript.Observation
	edit(b, ping, nil, nil)
	b.Add(ping)
	b.Add(pong)
	ref := b.Snapshot("s1", 3, 3)
	b.Attempt("a1", ref, func(at *transcript.Attempt) {
		at.Frame = idx(1)
		a = at
		edit(b, nil, a, nil)
	})
	resp := []byte(`{"id":"a1","jsonrpc":"2.0","result":{"content":[]}}`)
	p := b.Blob(resp)
	o = &transcript.Observation{AttemptID: "a1", Kind: transcript.ObsResponse, ResultType: "complete", Response: &p, Terminator: mcpwire.TermLF, Basis: transcript.BasisProducer, Frame: idx(1)}
	edit(b, nil, nil, o)
	b.Add(o)
	b.Seal()
	return b
}

// TestFrameSequence: the frame numbering of a proxy's transcript, and the
// claims of a frame line against its bytes.
func TestFrameSequence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed bool
		edit      func(ping *transcript.Frame, a *transcript.Attempt, o *transcript.Observation)
		verdict   verify.Verdict
		want      []verify.Code // problems
		pass      verify.Code   // a pass finding that must (or, with problems, must not) be there
	}{
		{"every frame once, in order", true, func(*transcript.Frame, *transcript.Attempt, *transcript.Observation) {}, verify.Verified, nil, verify.CodeFramesAccounted},
		{"a client frame skipped", true, func(_ *transcript.Frame, a *transcript.Attempt, _ *transcript.Observation) {
			if a != nil {
				a.Frame = idx(2)
			}
		}, verify.Failed, []verify.Code{verify.CodeFrameSequence}, verify.CodeFramesAccounted},
		{"a server frame committed twice", true, func(_ *transcript.Frame, _ *transcript.Attempt, o *transcript.Observation) {
			if o != nil {
				o.Frame = idx(0)
			}
		}, verify.Failed, []verify.Code{verify.CodeFrameSequence}, verify.CodeFramesAccounted},
		{"a response without its index", true, func(_ *transcript.Frame, _ *transcript.Attempt, o *transcript.Observation) {
			if o != nil {
				o.Frame = nil
			}
		}, verify.Failed, []verify.Code{verify.CodeFrameSequence}, verify.CodeFramesAccounted},
		{"frames in a transcript that does not commit to them", false, func(*transcript.Frame, *transcript.Attempt, *transcript.Observation) {}, verify.Failed, []verify.Code{verify.CodeFrameSequence}, verify.CodeFramesAccounted},
		{"a frame line's method against its bytes", true, func(ping *transcript.Frame, _ *transcript.Attempt, _ *transcript.Observation) {
			if ping != nil {
				ping.Method = "tools/list"
			}
		}, verify.Failed, []verify.Code{verify.CodeEvidenceMismatch}, ""},
		{"a refused frame claimed forwarded-readable", true, func(ping *transcript.Frame, _ *transcript.Attempt, _ *transcript.Observation) {
			if ping != nil {
				ping.Disposition, ping.Kind, ping.Rule, ping.Method, ping.RPCID = transcript.FrameRefused, transcript.FrameUnread, "bom", "", nil
			}
		}, verify.Failed, []verify.Code{verify.CodeEvidenceMismatch, verify.CodeFrameMisrecorded}, ""}, // the pong then answers no open request: unsolicited
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, codes := verdictCodes(t, framed(t, tc.committed, tc.edit).FS(), trusted(t))
			if rep.Verdict != tc.verdict || !slices.Equal(codes, tc.want) {
				t.Fatalf("verdict %s, problems %v; want %s, %v\n%s", rep.Verdict, codes, tc.verdict, tc.want, dump(rep))
			}
			if tc.pass != "" {
				has := slices.ContainsFunc(rep.Findings, func(f verify.Finding) bool { return f.Code == tc.pass })
				if has != (len(tc.want) == 0) {
					t.Errorf("%s reported %v, want %v\n%s", tc.pass, has, len(tc.want) == 0, dump(rep))
				}
			}
		})
	}
}

// TestFrameMisrecorded: what a frame line says the proxy did must be what
// a reference monitor does with those bytes.
func TestFrameMisrecorded(t *testing.T) {
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{},"name":"delete_everything"}}`)
	batch := []byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]`)
	list := []byte(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
	for _, tc := range []struct {
		name string
		edit func(b *verifytest.Builder, ping *transcript.Frame)
	}{
		{"a tools/call forwarded as a plain frame", func(b *verifytest.Builder, f *transcript.Frame) {
			f.Method, f.RPCID, f.Payload = "tools/call", &transcript.JSONRPCID{Present: true, Kind: transcript.IDNumber, Text: "1"}, b.Blob(call)
		}},
		{"a tools/call committed digest-only", func(b *verifytest.Builder, f *transcript.Frame) {
			p := b.Blob(call)
			p.Retained = false
			f.Method, f.RPCID, f.Payload = "tools/call", &transcript.JSONRPCID{Present: true, Kind: transcript.IDNumber, Text: "1"}, p
		}},
		{"an unreadable client frame forwarded", func(b *verifytest.Builder, f *transcript.Frame) {
			f.Kind, f.Rule, f.Method, f.RPCID, f.Payload = transcript.FrameUnread, "batch", "", nil, b.Blob(batch)
		}},
		{"frame_too_large on 100 bytes", func(b *verifytest.Builder, f *transcript.Frame) {
			f.Kind, f.Rule, f.Method, f.RPCID, f.Disposition, f.Payload = transcript.FrameUnread, "frame_too_large", "", nil, transcript.FrameRefused, b.Blob(call)
		}},
		{"a readable tools/list refused", func(b *verifytest.Builder, f *transcript.Frame) {
			f.Disposition, f.Method, f.RPCID, f.Payload = transcript.FrameRefused, "tools/list", &transcript.JSONRPCID{Present: true, Kind: transcript.IDString, Text: `"l"`}, b.Blob(list)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := framedWith(t, true, func(b *verifytest.Builder, ping *transcript.Frame, _ *transcript.Attempt, _ *transcript.Observation) {
				if ping != nil {
					tc.edit(b, ping)
				}
			})
			rep, codes := verdictCodes(t, b.FS(), trusted(t))
			if rep.Verdict != verify.Failed || !slices.Contains(codes, verify.CodeFrameMisrecorded) {
				t.Fatalf("verdict %s, problems %v; want failed with frame_misrecorded\n%s", rep.Verdict, codes, dump(rep))
			}
		})
	}
}

// TestResponseHiddenAsFrame: a call's response committed as a plain frame,
// its attempt left to be resolved unknown, hides its outcome: a lie of
// omission the verifier names. Under an id that another request also
// waits on, the frame may answer either, and passes.
func TestResponseHiddenAsFrame(t *testing.T) {
	build := func(t *testing.T, otherRequest bool) *verifytest.Builder {
		b := framedWith(t, true, func(b *verifytest.Builder, ping *transcript.Frame, _ *transcript.Attempt, o *transcript.Observation) {
			if ping != nil && otherRequest {
				// the ping shares the call's id, "a1"
				ping.RPCID.Text = `"a1"`
				ping.Payload = b.Blob([]byte(`{"jsonrpc":"2.0","id":"a1","method":"ping"}`))
			}
		})
		return b
	}
	for _, tc := range []struct {
		name         string
		otherRequest bool
		want         bool
	}{
		{"the only request waiting under the id", false, true},
		{"another request waits under the same id", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := build(t, tc.otherRequest)
			if tc.otherRequest {
				// The ping now waits under "a1": the server's first frame
				// is a notification, not the pong (which would answer no
				// open request: unsolicited).
				for i, l := range b.Lines {
					ev, err := transcript.DecodeLine(l)
					if err != nil {
						continue
					}
					if f, ok := ev.(*transcript.Frame); ok && f.Direction == transcript.ServerToClient && f.Index == 0 {
						note := &transcript.Frame{Seq: f.Seq, AtMs: f.AtMs, Direction: transcript.ServerToClient, Index: 0, Disposition: transcript.FrameForwarded,
							Kind: "notification", Method: "notifications/message",
							Payload: b.Blob([]byte(`{"jsonrpc":"2.0","method":"notifications/message"}`)), Terminator: mcpwire.TermLF}
						line, err := transcript.Encode(note)
						if err != nil {
							t.Fatal(err)
						}
						b.Lines[i] = line
					}
				}
			}
			// Replace the call's response observation (the line before
			// the seal) by a frame with the same bytes, and resolve the
			// attempt unknown instead.
			last := len(b.Lines) - 2
			obs, err := transcript.DecodeLine(b.Lines[last])
			if err != nil {
				t.Fatal(err)
			}
			o := obs.(*transcript.Observation)
			b.Lines = b.Lines[:last]
			b.Add(&transcript.Frame{Direction: transcript.ServerToClient, Index: 1, Disposition: transcript.FrameForwarded,
				Kind: transcript.FrameResponse, RPCID: &transcript.JSONRPCID{Present: true, Kind: transcript.IDString, Text: `"a1"`},
				Payload: *o.Response, Terminator: mcpwire.TermLF})
			b.Resolve("a1")
			b.Seal()
			rep, codes := verdictCodes(t, b.FS(), trusted(t))
			if got := slices.Contains(codes, verify.CodeFrameMisrecorded); got != tc.want {
				t.Fatalf("frame_misrecorded %v, want %v\n%s", got, tc.want, dump(rep))
			}
		})
	}
}
