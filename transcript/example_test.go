package transcript_test

import (
	"fmt"
	"io"
	"strings"

	"github.com/tracectl/tracectl/transcript"
)

// A verifier streams transcript.jsonl through a Reader, feeding every exact
// line to a Committer, and compares the root with the signed record's
// tool_transcript.hash.
func ExampleNewReader() {
	const jsonl = `{"canonicalization":{"declarations":"tracectl/jcs-mcp-decl-exact-binary64","lines":"tracectl/jcs-trace-v0.2-int53"},"durability":"strict","execution_scope":"0b6c1c0e-5d3e-4d57-9a3a-4c5b7e0f1a2b","format":"tracectl.transcript/v1","limits":{"max_frame_bytes":16777216,"max_page_bytes":4194304,"max_snapshot_bytes":67108864,"max_snapshot_pages":100},"merkle":"rfc6962-sha256","producer":{"name":"example","version":"1"},"profile":"tracectl.mcp-transcript/trace-v0.3-proposal","retention":"full","seq":0,"server":{"argc":0,"transport":"in-process"},"started_at_ms":1700000000000,"type":"header"}
{"at_ms":1700000000100,"attempts":0,"recovered":false,"responses":0,"seq":1,"transport_failures":0,"type":"seal","unknown":0}
`
	r := transcript.NewReader(strings.NewReader(jsonl))
	var c transcript.Committer
	for {
		raw, ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println("invalid:", err)
			return
		}
		c.Add(raw)
		fmt.Printf("%T\n", ev)
	}
	fmt.Println(c.Count(), "lines, root", c.Root())
	// Output:
	// *transcript.Header
	// *transcript.Seal
	// 2 lines, root sha256:d69b0314af64e4811a239baa50dd0529619aab39b6cdf508d0008a239f6d9981
}

// An inclusion proof discloses chosen lines (and always the last one) with
// their audit paths; anyone holding the signed root can check it.
func ExampleProve() {
	lines := [][]byte{[]byte(`{"seq":0}`), []byte(`{"seq":1}`), []byte(`{"seq":2}`)}
	root := transcript.Root(lines)
	p, err := transcript.Prove(lines, []int64{1})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(p.Entries), "lines disclosed:", p.Entries[0].Line, p.Entries[1].Line)
	fmt.Println("check:", transcript.CheckProof(p, root))
	// Output:
	// 2 lines disclosed: {"seq":1} {"seq":2}
	// check: <nil>
}
