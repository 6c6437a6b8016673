package verify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tracectl/tracectl/transcript"
)

// TestAttemptTable: the compact table agrees with a map through growth,
// ids of every length up to 128, updates, and the three
// kinds of JSON-RPC id; iteration is in insertion order.
func TestAttemptTable(t *testing.T) {
	tab := newAttemptTable()
	want := map[string]attemptState{}
	var order []string
	id := func(i int) string {
		return fmt.Sprintf("a%d", i) + strings.Repeat("x", i%128/2)
	}
	const n = 5000
	for i := 0; i < n; i++ {
		rpc := transcript.JSONRPCID{Present: true, Text: fmt.Sprint(i)}
		switch i % 3 {
		case 1:
			rpc = transcript.JSONRPCID{Present: true, Digest: "sha256:" + strings.Repeat(fmt.Sprintf("%02x", i%256), 32)}
		case 2:
			rpc = transcript.JSONRPCID{}
		}
		if _, ok := tab.get(id(i)); ok {
			t.Fatalf("%s found before it was added", id(i))
		}
		if err := tab.add(id(i), int64(i), rpc); err != nil {
			t.Fatal(err)
		}
		want[id(i)] = attemptState{seq: int64(i)}
		order = append(order, id(i))
		if i%7 == 0 {
			st := attemptState{seq: int64(i), state: stUnknown, resolved: true}
			tab.put(id(i), st)
			want[id(i)] = st
		}
	}
	for k, w := range want {
		got, ok := tab.get(k)
		if !ok || got != w {
			t.Fatalf("%s: got %+v %v, want %+v", k, got, ok, w)
		}
	}
	for i := 0; i < n; i++ {
		kind, b := tab.rpc(id(i))
		switch i % 3 {
		case 0:
			if kind != rpcText || string(b) != fmt.Sprint(i) {
				t.Fatalf("%s: rpc %d %q", id(i), kind, b)
			}
		case 1:
			if kind != rpcDigest || len(b) != 32 || b[0] != byte(i%256) {
				t.Fatalf("%s: rpc %d %x", id(i), kind, b)
			}
		case 2:
			if kind != rpcNone || len(b) != 0 {
				t.Fatalf("%s: rpc %d %q", id(i), kind, b)
			}
		}
	}
	if _, ok := tab.get("absent"); ok {
		t.Error("an absent id was found")
	}
	i := 0
	tab.each(func(k string, _ attemptState) {
		if k != order[i] {
			t.Fatalf("each: %d is %s, want %s", i, k, order[i])
		}
		i++
	})
	if i != n || tab.len() != n {
		t.Errorf("each visited %d, len %d, want %d", i, tab.len(), n)
	}
	if err := tab.add("big", 1<<32, transcript.JSONRPCID{}); err == nil {
		t.Error("a seq beyond 2^32-1 was accepted")
	}
}
