package transcript

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"
)

// BenchmarkReader streams a 10k-attempt transcript through the Reader and
// the Committer (what verification does per line) and reports the ratio
// to the anchor: encoding/json.Unmarshal into any over the same bytes.
func BenchmarkReader(b *testing.B) {
	data := joinLines(sampleTranscript(b, 5000))
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r := NewReader(bytes.NewReader(data))
		var c Committer
		for {
			raw, _, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			c.Add(raw)
		}
	}
	ours := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for i := 0; i < b.N; i++ {
		for _, l := range lines {
			var v any
			if err := json.Unmarshal(l, &v); err != nil {
				b.Fatal(err)
			}
		}
	}
	anchor := time.Since(start)
	b.ReportMetric(float64(ours)/float64(anchor), "x-json-unmarshal")
}
