package verify_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tracectl/tracectl/internal/verifytest"
	"github.com/tracectl/tracectl/verify"
)

// Verify a bundle against the key you trust, at a reference time you
// choose. A real caller passes verify.DirFS(dir) and time.Now().
func ExampleVerifier_Bundle() {
	t := &testing.T{} // verifytest reports builder faults through a testing.TB
	bundle := verifytest.Standard(t).FS()

	v, err := verify.New(verify.Options{
		TrustedKey: verifytest.Key(t, 1).Public(),
		At:         verifytest.At,
	})
	if err != nil {
		fmt.Println("options:", err)
		return
	}
	rep, err := v.Bundle(context.Background(), bundle)
	if errors.Is(err, verify.ErrFailed) {
		fmt.Println("do not rely on this bundle")
	}
	fmt.Println(rep.Verdict, rep.TrustBasis)
	fmt.Printf("%d attempts: %d responses, %d unknown\n", rep.Counts.Attempts, rep.Counts.Responses, rep.Counts.Unknown)
	for _, f := range rep.Find(verify.CodeOutcomeUnknown) {
		fmt.Println(f.Code, f.Subject)
	}
	// Output:
	// verified trusted_key
	// 3 attempts: 2 responses, 1 unknown
	// outcome_unknown attempt a2
}

// Options are validated together before any evidence is read.
func ExampleNew() {
	_, err := verify.New(verify.Options{})
	fmt.Println(errors.Is(err, verify.ErrOptions))
	// Output:
	// true
}
