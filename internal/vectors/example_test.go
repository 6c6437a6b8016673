package vectors_test

import (
	"context"
	"fmt"

	"github.com/tracectl/tracectl/internal/vectors"
)

// Run scores a verifier, here tracectl's own, against the compiled-in
// vectors. Another implementation plugs in as a VerifierFunc (or, from the
// command line, through 'tracectl vectors run --verifier').
func ExampleRun() {
	res, err := vectors.Run(context.Background(), vectors.Embedded(), vectors.Tracectl)
	if err != nil {
		fmt.Println(err)
		return
	}
	pass := 0
	for _, r := range res {
		if r.Pass {
			pass++
		}
	}
	fmt.Printf("%d of %d vectors pass\n", pass, len(res))
	r := res[0]
	fmt.Printf("row %d %s (%s): want %s, got %s\n", r.Row, r.ID, r.Case, r.Expected.Verdict, r.Got.Verdict)
	// Output:
	// 65 of 65 vectors pass
	// row 1 r1-snapshot-matches (positive): want verified, got verified
}

// Row gives the section-6 table a vector's manifest refers to.
func ExampleRow() {
	positive, negative, distinction, _ := vectors.Row(6)
	fmt.Println(positive)
	fmt.Println(negative)
	fmt.Println(distinction)
	// Output:
	// Available snapshot bytes match
	// URI resolves to changed bytes or bytes are missing
	// Mismatch or unavailable, separately
}
