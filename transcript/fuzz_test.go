package transcript

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/tracectl/tracectl/canon"
)

// FuzzDecodeLine: DecodeLine never panics, returns either an event or a
// *LineError, and an accepted line re-encodes to exactly its bytes. The
// fast path (decodeFast, with its pooled encoder and interned strings)
// decides exactly as the reference path (decodeStrict), and what it
// accepts Encode gives back byte for byte. Seed corpus:
// testdata/fuzz/FuzzDecodeLine.
func FuzzDecodeLine(f *testing.F) {
	for _, ev := range validEvents() {
		f.Add(mustLine(f, ev))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if fev := decodeFast(line); fev != nil {
			if again, err := Encode(fev); err != nil || !bytes.Equal(again, line) {
				t.Fatalf("decodeFast accepted %q, which Encode gives as %q (%v)", line, again, err)
			}
		}
		ev, err := DecodeLine(line)
		// The fast path never decides differently from the reference path.
		if len(line) <= MaxLineBytes {
			sev, serr := decodeStrict(line)
			if (err == nil) != (serr == nil) || codeOf(err) != codeOf(serr) || !reflect.DeepEqual(ev, sev) {
				t.Fatalf("DecodeLine = %v, %v; decodeStrict = %v, %v", ev, err, sev, serr)
			}
		}
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Code == "" {
				t.Fatalf("error %v is not a *LineError with a code", err)
			}
			return
		}
		if got := mustLine(t, ev); !bytes.Equal(got, line) {
			t.Fatalf("accepted %q but it re-encodes to %q", line, got)
		}
		if err := canon.Check(line, canon.PolicyV02); err != nil {
			t.Fatalf("accepted a line that is not canonical: %v", err)
		}
	})
}

// FuzzReader: the Reader never panics, stops with io.EOF only on a valid
// transcript, and the lines it returns are exactly the stream's prefix.
// Seed corpus: testdata/fuzz/FuzzReader.
func FuzzReader(f *testing.F) {
	lines := sampleTranscript(f, 2)
	f.Add(joinLines(lines))
	f.Add(joinLines(lines[:3]))
	f.Add(append(joinLines(lines[:2]), lines[2][:7]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		var prefix []byte
		for {
			raw, _, err := r.Next()
			if err == io.EOF {
				if !bytes.Equal(prefix, data) {
					t.Fatalf("io.EOF after %d of %d bytes", len(prefix), len(data))
				}
				return
			}
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) {
					t.Fatalf("error %v is not a *LineError", err)
				}
				if le.Offset != int64(len(prefix)) || r.Offset() != int64(len(prefix)) {
					t.Fatalf("error offset %d, reader offset %d, valid prefix %d", le.Offset, r.Offset(), len(prefix))
				}
				return
			}
			prefix = append(append(prefix, raw...), '\n')
			if !bytes.HasPrefix(data, prefix) {
				t.Fatalf("returned lines are not the stream's prefix")
			}
		}
	})
}

// FuzzParseProof: ParseProof never panics, and an accepted proof marshals
// back to exactly its input. Seed corpus: testdata/fuzz/FuzzParseProof.
func FuzzParseProof(f *testing.F) {
	// Short lines keep the seeds small, so minimizing what the fuzzer finds
	// stays quick.
	lines := [][]byte{[]byte(`{}`), []byte(`{"a":1}`), []byte(`x`), []byte(`"\u00e9"`), []byte(`{"seq":4}`)}
	for _, idx := range [][]int64{{0}, {1, 3}, {4}} {
		p, err := Prove(lines, idx)
		if err != nil {
			f.Fatal(err)
		}
		b, err := p.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProof(data)
		if err != nil {
			return
		}
		b, err := p.Marshal()
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("accepted proof does not marshal back: %v", err)
		}
		_ = CheckProof(p, p.Root)
	})
}
