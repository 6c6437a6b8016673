package transcript

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestReaderValid(t *testing.T) {
	lines := sampleTranscript(t, 5)
	r := NewReader(bytes.NewReader(joinLines(lines)))
	var c Committer
	for i := 0; ; i++ {
		raw, ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if !bytes.Equal(raw, lines[i]) {
			t.Errorf("line %d: raw bytes differ", i)
		}
		if ev == nil {
			t.Errorf("line %d: no event", i)
		}
		c.Add(raw)
	}
	if c.Root() != Root(lines) || !r.sealed || r.Lines() != int64(len(lines)) {
		t.Errorf("root/sealed/lines = %s/%v/%d", c.Root(), r.sealed, r.Lines())
	}
	if r.Offset() != int64(len(joinLines(lines))) {
		t.Errorf("Offset() = %d, want %d", r.Offset(), len(joinLines(lines)))
	}
	// io.EOF again after the end.
	if _, _, err := r.Next(); err != io.EOF {
		t.Errorf("Next after EOF = %v", err)
	}
}

func TestReaderRejects(t *testing.T) {
	lines := sampleTranscript(t, 3) // header, 6 lines, seal
	join := func(ls ...[]byte) []byte { return joinLines(ls) }
	otherScope := sampleAttempt(1, "a1")
	otherScope.ExecutionScope = "another-scope"
	tests := []struct {
		name    string
		data    []byte
		code    string
		atLine  int64
		offset0 bool
	}{
		{"empty", nil, CodeHeaderMissing, 0, true},
		{"no header", join(lines[1]), CodeHeaderMissing, 0, true},
		{"seq gap", join(lines[0], lines[1], lines[3]), CodeSeqGap, 2, false},
		{"header again", join(lines[0], mustLine(t, func() *Header { h := sampleHeader(); h.Seq = 1; return h }())), CodeInvalidMember, 1, false},
		{"after seal", append(joinLines(lines), join(mustLine(t, &Recovery{Type: typeRecovery, Seq: int64(len(lines)), Detail: "x"}))...), CodeAfterSeal, int64(len(lines)), false},
		{"scope", join(lines[0], mustLine(t, otherScope)), codeScopeMismatch, 1, false},
		{"torn", append(join(lines[0], lines[1]), lines[2][:10]...), CodeTornLine, 2, false},
		{"crlf", []byte(strings.Replace(string(join(lines[0], lines[1])), "\n", "\r\n", 1)), CodeNotCanonical, 0, true},
		{"too long", append(join(lines[0]), bytes.Repeat([]byte("x"), MaxLineBytes+1)...), CodeTooLong, 1, false},
		{"blank line", join(lines[0], nil), CodeNotCanonical, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tt.data))
			var err error
			for err == nil {
				_, _, err = r.Next()
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want *LineError %s", err, tt.code)
			}
			if le.Code != tt.code || le.Seq != tt.atLine {
				t.Errorf("got %s at line %d (%s), want %s at line %d", le.Code, le.Seq, le.Detail, tt.code, tt.atLine)
			}
			if tt.offset0 && le.Offset != 0 {
				t.Errorf("offset %d, want 0", le.Offset)
			}
			// Sticky.
			if _, _, again := r.Next(); again != err {
				t.Errorf("second Next = %v, want the same error", again)
			}
		})
	}
}

func TestReaderTornLineBytes(t *testing.T) {
	lines := sampleTranscript(t, 1)
	data := append(joinLines(lines[:2]), lines[2][:25]...)
	r := NewReader(bytes.NewReader(data))
	r.Next()
	r.Next()
	raw, _, err := r.Next()
	if codeOf(err) != CodeTornLine {
		t.Fatalf("err = %v", err)
	}
	if !bytes.Equal(raw, lines[2][:25]) || r.Offset() != int64(len(joinLines(lines[:2]))) {
		t.Errorf("torn bytes %q at offset %d", raw, r.Offset())
	}
}

// lineSource generates an unsealed transcript of n attempts on the fly, so
// the test holds none of it.
type lineSource struct {
	t    testing.TB
	n, i int
	buf  []byte
	tmpl string
}

func (s *lineSource) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		switch {
		case s.i == 0:
			s.buf = append(mustLine(s.t, sampleHeader()), '\n')
		case s.i <= s.n:
			if s.tmpl == "" {
				s.tmpl = string(mustLine(s.t, sampleAttempt(987654321, "a987654321")))
			}
			n := itoa(int64(s.i))
			s.buf = []byte(strings.Replace(strings.Replace(s.tmpl, "987654321", n, 2), "987654321", n, 1) + "\n")
		default:
			return 0, io.EOF
		}
		s.i++
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

func TestReaderMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 10k lines")
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// 10k attempt lines are ~6 MiB: a reader that kept them would blow
	// the bound below.
	r := NewReader(&lineSource{t: t, n: 10_000})
	var c Committer
	before := heap()
	var peak uint64
	for i := 0; ; i++ {
		raw, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c.Add(raw)
		if i%2_500 == 0 {
			peak = max(peak, heap())
		}
	}
	if r.Lines() != 10_001 {
		t.Fatalf("read %d lines", r.Lines())
	}
	if grown := int64(peak) - int64(before); grown > 4<<20 {
		t.Errorf("heap grew by %d bytes while streaming 10k lines, want < 4 MiB", grown)
	}
}
