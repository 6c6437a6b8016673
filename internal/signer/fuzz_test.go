//go:build linux

package signer

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/sign"
)

// FuzzCheckStatement: what the server would sign. For any kind and bytes
// CheckStatement never panics, refuses with an *Error carrying a code,
// and accepts only the canonical bytes of a Trust Record without a
// signature that commits to a transcript under the server's key.
func FuzzCheckStatement(f *testing.F) {
	key := testKey(f, 7)
	good := preimage(f, key, 3)
	f.Add(string(KindRecord), good)
	f.Add(string(KindCheckpoint), good)
	f.Add(string(KindRecord), append(append([]byte{}, good...), ' '))
	f.Add(string(KindRecord), []byte(`{"a":1}`))
	f.Add("bogus", good)
	f.Fuzz(func(t *testing.T, kind string, payload []byte) {
		err := CheckStatement(Kind(kind), payload, key.Public())
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == "" {
				t.Fatalf("refusal %v is not an *Error with a code", err)
			}
			return
		}
		if canon.Check(payload, canon.PolicyV02) != nil {
			t.Fatalf("accepted bytes that are not canonical: %q", payload)
		}
		rec, perr := sign.ParseRecord(payload)
		if perr != nil || rec.Signature != "" || rec.ToolTranscript == nil {
			t.Fatalf("accepted %q: parse %v, signature %q", payload, perr, rec.Signature)
		}
	})
}

// FuzzReadMessage: the request reader never panics, never reads past its
// bound, and a request it accepts was one LF-terminated JSON text.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte(`{"v":1,"op":"public_key"}` + "\n"))
	f.Add([]byte(`{"v":1,"op":"sign","kind":"record","payload":"e30="}` + "\n"))
	f.Add([]byte(`{"v":1,"op":"sign"}{"v":1}` + "\n"))
	f.Add([]byte(`{"v":1,"op":"sign","extra":1}` + "\n"))
	f.Add([]byte(`{"v":1`))
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 256
		var req request
		err := readMessage(bytes.NewReader(data), max, &req)
		if err == nil {
			i := bytes.IndexByte(data, '\n')
			if i < 0 || i+1 > max {
				t.Fatalf("accepted a message without an LF within %d bytes: %q", max, data)
			}
		}
	})
}

// FuzzCheckJournal: the chain check never panics; a journal it accepts
// has one entry per line, and the same journal with any line removed
// (other than the last) is refused.
func FuzzCheckJournal(f *testing.F) {
	var good bytes.Buffer
	prev := zeroHash
	for i := int64(1); i <= 3; i++ {
		line, err := json.Marshal(Entry{Seq: i, Time: time.Unix(1_800_000_000, 0).UTC().Format(time.RFC3339Nano), PID: 1,
			Kind: KindRecord, SHA256: strings.Repeat("a", 64), Key: strings.Repeat("K", 43), Prev: prev})
		if err != nil {
			f.Fatal(err)
		}
		good.Write(append(line, '\n'))
		prev = lineHash(line)
	}
	if _, err := CheckJournal(bytes.NewReader(good.Bytes())); err != nil {
		f.Fatalf("the seed journal is refused: %v", err)
	}
	f.Add(good.Bytes())
	f.Add([]byte("{}\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := CheckJournal(bytes.NewReader(data))
		if err != nil {
			return
		}
		lines := bytes.SplitAfter(data, []byte("\n"))
		if n := int64(bytes.Count(data, []byte("\n"))); st.Lines != n {
			t.Fatalf("accepted %d entries in %d lines", st.Lines, n)
		}
		if st.Lines >= 2 {
			cut := bytes.Join(lines[1:], nil)
			if _, err := CheckJournal(bytes.NewReader(cut)); err == nil {
				t.Fatalf("a journal without its first line is accepted:\n%s", cut)
			}
		}
	})
}
