package sign

import (
	"crypto/ed25519"
	"testing"
	"time"
)

// The anchor for both benchmarks is crypto/ed25519 over the same canonical
// preimage, interleaved in the same loop; "x-ed25519" is the ratio.

func BenchmarkSign(b *testing.B) {
	s := newSigner(b, Ed25519)
	priv := genKey(b, Ed25519).(ed25519.PrivateKey)
	rec, err := Build(testOptions(s.Public()))
	if err != nil {
		b.Fatal(err)
	}
	pre, err := rec.check()
	if err != nil {
		b.Fatal(err)
	}
	var ours, anchor time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := Sign(rec, s); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ed25519.Sign(priv, pre)
		anchor += time.Since(t1)
		ours += t1.Sub(t0)
	}
	report(b, ours, anchor)
}

func BenchmarkVerifySignature(b *testing.B) {
	s := newSigner(b, Ed25519)
	data := signedRecord(b, s)
	rec, err := ParseRecord(data)
	if err != nil {
		b.Fatal(err)
	}
	pre, err := rec.check()
	if err != nil {
		b.Fatal(err)
	}
	sig, _ := decodeB64URL(rec.Signature)
	pub := s.Public().(ed25519.PublicKey)
	b.Run("VerifySignature", func(b *testing.B) {
		var ours, anchor time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := VerifySignature(data, rec); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if !ed25519.Verify(pub, pre, sig) {
				b.Fatal("anchor failed")
			}
			anchor += time.Since(t1)
			ours += t1.Sub(t0)
		}
		report(b, ours, anchor)
	})
	// What a verifier does with a record: parse, check shape, verify.
	b.Run("ParseRecord+VerifySignature", func(b *testing.B) {
		var ours, anchor time.Duration
		for b.Loop() {
			t0 := time.Now()
			r, err := ParseRecord(data)
			if err == nil {
				err = VerifySignature(data, r)
			}
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			ed25519.Verify(pub, pre, sig)
			anchor += time.Since(t1)
			ours += t1.Sub(t0)
		}
		report(b, ours, anchor)
	})
}

func report(b *testing.B, ours, anchor time.Duration) {
	n := float64(b.N)
	b.ReportMetric(float64(ours.Nanoseconds())/n, "ns/op-sign")
	b.ReportMetric(float64(anchor.Nanoseconds())/n, "ns/op-ed25519")
	b.ReportMetric(float64(ours)/float64(anchor), "x-ed25519")
}
