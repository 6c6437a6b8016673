package canon_test

import (
	"errors"
	"fmt"

	"github.com/tracectl/tracectl/canon"
)

func ExampleCanonicalize() {
	out, err := canon.Canonicalize([]byte(`{"b": [1.0, 1e3, -0], "a": "\u0041"}`), canon.PolicyV02)
	fmt.Println(string(out), err)

	// A schema value such as 0.7 is refused by the TRACE v0.2 policy and
	// admitted, unchanged, by the explicit MCP declaration widening.
	decl := []byte(`{"minimum": 0.7, "maximum": 4.50}`)
	_, err = canon.Canonicalize(decl, canon.PolicyV02)
	fmt.Println(err)
	out, _ = canon.Canonicalize(decl, canon.PolicyMCPDecl)
	fmt.Println(string(out))

	// A value binary64 would round is refused under every policy.
	_, err = canon.Canonicalize([]byte(`{"id": 9007199254740993}`), canon.PolicyMCPDecl)
	fmt.Println(err)
	// Output:
	// {"a":"A","b":[1,1000,0]} <nil>
	// unsupported_number at /minimum (byte 12): "0.7": non-integer number (the policy admits integers only) (policy tracectl/jcs-trace-v0.2-int53)
	// {"maximum":4.5,"minimum":0.7}
	// unsupported_number at /id (byte 7): "9007199254740993": integer outside ±9007199254740991 (policy tracectl/jcs-mcp-decl-exact-binary64)
}

func ExampleDigest() {
	d, err := canon.Digest([]byte(`{"b": 2, "a": 1}`), canon.PolicyV02)
	fmt.Println(d, err)
	// The digest is SHA-256 over the canonical bytes.
	fmt.Println(canon.SHA256([]byte(`{"a":1,"b":2}`)) == d)
	// Output:
	// sha256:43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777 <nil>
	// true
}

func ExampleParse() {
	page := []byte(`{"tools": [{"name": "a", "x": 1, "\u0078": 2}, {"name": "b", "minimum": 0.5}]}`)
	doc, err := canon.Parse(page, canon.ParseOptions{AllowDuplicateKeys: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	tools, _ := doc.Root().Get("tools")
	for _, tool := range tools.Elems() {
		name, _ := tool.Get("name")
		n, _ := name.Str()
		d, err := tool.Digest(canon.PolicyMCPDecl)
		if err != nil {
			fmt.Println(n, "unsupported:", err)
			continue
		}
		fmt.Println(n, d)
	}
	// Output:
	// a unsupported: duplicate_key at /tools/0/x (byte 33): duplicate member name "x"
	// b sha256:7946202320e8b2633a267c55e538b282ab90b292ef062e4197b188c1083b268e
}

func ExampleError() {
	_, err := canon.Canonicalize([]byte(`{"a": {"b": 1, "\u0062": 2}}`), canon.PolicyV02)
	var ce *canon.Error
	if errors.As(err, &ce) {
		fmt.Println(ce.Code, ce.Pointer, ce.Offset)
	}
	fmt.Println(errors.Is(err, canon.CodeDuplicateKey))
	// Output:
	// duplicate_key /a/b 15
	// true
}

// The worked example of the package documentation.
func Example_packageDoc() {
	in := []byte(`{ "name": "get_weather", "inputSchema": { "minimum": 0.50, "maximum": 1e2 } }`)
	out, _ := canon.Canonicalize(in, canon.PolicyMCPDecl)
	fmt.Println(string(out))
	_, err := canon.Canonicalize(in, canon.PolicyV02)
	var ce *canon.Error
	errors.As(err, &ce)
	fmt.Println(ce.Code, ce.Pointer, ce.Offset)
	// Output:
	// {"inputSchema":{"maximum":100,"minimum":0.5},"name":"get_weather"}
	// unsupported_number /inputSchema/minimum 53
}
