package producer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tracectl/tracectl/canon"
	"github.com/tracectl/tracectl/transcript"
)

func TestSpoolSettles(t *testing.T) {
	frame := func(b []byte) string {
		d := canon.SHA256(b)
		return d[len("sha256:"):] + " " + itoa(len(b)) + "\n" + string(b) + "\n"
	}
	good1, good2, bad, after := []byte("first payload"), []byte("second\npayload with an LF"), []byte("tampered"), []byte("after the damage")
	damaged := canon.SHA256([]byte("original"))[len("sha256:"):] + " 8\n" + string(bad) + "\n"
	tests := []struct {
		name  string
		spool string
		want  [][]byte // blobs that must exist
		not   [][]byte // blobs that must not
	}{
		{"complete", frame(good1) + frame(good2), [][]byte{good1, good2}, nil},
		{"duplicate", frame(good1) + frame(good1) + frame(good2), [][]byte{good1, good2}, nil},
		{"torn bytes", frame(good1) + frame(good2)[:20], [][]byte{good1}, [][]byte{good2}},
		{"torn header", frame(good1) + "abc", [][]byte{good1}, nil},
		{"missing final LF", frame(good1) + frame(good2)[:len(frame(good2))-1], [][]byte{good1, good2}, nil},
		{"damaged frame skipped", frame(good1) + damaged + frame(after), [][]byte{good1, after}, [][]byte{bad}},
		{"bad length", frame(good1) + "ab 1\nx\n", [][]byte{good1}, nil},
		{"empty", "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700)
			s := newBlobStore(OSFS{}, dir)
			if err := os.WriteFile(s.spool, []byte(tt.spool), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := s.settle(true); err != nil {
				t.Fatal(err)
			}
			for _, b := range tt.want {
				got, err := os.ReadFile(filepath.Join(dir, transcript.BlobPath(canon.SHA256(b))))
				if err != nil || string(got) != string(b) {
					t.Errorf("blob %q = %q, %v", b, got, err)
				}
			}
			for _, b := range tt.not {
				if _, err := os.Stat(filepath.Join(dir, transcript.BlobPath(canon.SHA256(b)))); err == nil {
					t.Errorf("blob %q written from a damaged spool", b)
				}
			}
			if _, err := os.Stat(s.spool); err == nil {
				t.Errorf("spool not removed")
			}
			ents, _ := os.ReadDir(s.dir)
			for _, e := range ents {
				if transcript.BlobPath("sha256:"+e.Name()) == "" {
					t.Errorf("stray file %s in blobs/sha256", e.Name())
				}
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
