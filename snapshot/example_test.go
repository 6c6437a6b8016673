package snapshot_test

import (
	"fmt"

	"github.com/tracectl/tracectl/snapshot"
)

// A proxy feeds the collector the exact tools/list lines a client
// exchanged. The empty string is a real cursor; the page without nextCursor
// ends the collection.
func ExampleCollector() {
	c, err := snapshot.NewCollector(snapshot.Options{CaptureID: "cap-0001"})
	if err != nil {
		panic(err)
	}
	exchanges := [][2]string{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"search","inputSchema":{"type":"object","properties":{"k":{"type":"number","minimum":0.5}}}}],"nextCursor":"","ttlMs":60000,"cacheScope":"public"}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":""}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"fetch","inputSchema":{"type":"object","properties":{"a":1,"a":2}}}],"ttlMs":60000,"cacheScope":"public"}}`},
	}
	for _, e := range exchanges {
		if err := c.Add([]byte(e[0]), []byte(e[1])); err != nil {
			panic(err)
		}
	}
	s, err := c.Snapshot()
	if err != nil {
		panic(err)
	}
	m := s.Manifest
	fmt.Println("complete:", m.Complete, "pages:", len(m.Pages), "tools:", len(m.Tools))
	for _, t := range m.Tools {
		d := t.Declaration
		if d.Status == snapshot.DeclOK {
			fmt.Println(*t.Name, d.Status)
		} else {
			fmt.Println(*t.Name, d.Status, d.Code, *d.Pointer)
		}
	}
	// Output:
	// complete: true pages: 2 tools: 2
	// search ok
	// fetch unsupported duplicate_key /inputSchema/properties/a
}
