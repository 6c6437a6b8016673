package clientread

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioCases: the messages (by their text) each SDK's stdio client reads.
// goErr: the Go SDK stops reading with an error (after the frames listed).
var stdioCases = []struct {
	name  string
	in    string
	goSDK []string
	goErr bool
	ts    []string // the lines TS hands to JSON.parse
	tsOK  int      // how many of those the TS SDK accepts
}{
	{"lf", "{A}\n{B}\n", []string{"{A}", "{B}"}, false, []string{"{A}", "{B}"}, 2},
	{"crlf", "{A}\r\n{B}\r\n", []string{"{A}", "{B}"}, false, []string{"{A}", "{B}"}, 2},
	{"no final lf", "{A}\n{B}", []string{"{A}", "{B}"}, false, []string{"{A}"}, 1},
	{"trailing space", "{A} \n{B}\n", nil, true, []string{"{A} ", "{B}"}, 2},
	{"two on a line", "{A}{B}\n", nil, true, []string{"{A}{B}"}, 0},
	{"lone cr between", "{A}\r{B}\n", []string{"{A}", "{B}"}, false, []string{"{A}\r{B}"}, 0},
	{"value across lines", "{\"jsonrpc\":\"2.0\",\n\"method\":\"a\"}\n", []string{"{\"jsonrpc\":\"2.0\",\n\"method\":\"a\"}"}, false, []string{"{\"jsonrpc\":\"2.0\",", "\"method\":\"a\"}"}, 0},
	{"blank line", "{A}\n\n{B}\n", []string{"{A}", "{B}"}, false, []string{"{A}", "", "{B}"}, 2},
	{"bad line then good", "x\n{A}\n", nil, true, []string{"x", "{A}"}, 1},
	{"bom", "\xEF\xBB\xBF{A}\n", nil, true, []string{"\uFEFF{A}"}, 0},
	{"leading space", "  {A}\n", []string{"{A}"}, false, []string{"  {A}"}, 1},
}

func TestStdioReaders(t *testing.T) {
	for _, tc := range stdioCases {
		in := []byte(expand(tc.in))
		frames, err := GoStdio(in)
		if want := expandAll(tc.goSDK); !slices.Equal(toStrings(frames), want) || (err != nil) != tc.goErr {
			t.Errorf("%s: GoStdio = %q, %v; want %q, error %v", tc.name, frames, err, want, tc.goErr)
		}
		if got, want := toStrings(TSStdioLines(in)), expandAll(tc.ts); !slices.Equal(got, want) {
			t.Errorf("%s: TSStdioLines = %q, want %q", tc.name, got, want)
		}
	}
}

// TestGoStdioMatchesIOTransport runs the SDK's own IOTransport on each case:
// the copy must yield the same messages and stop where it stops.
func TestGoStdioMatchesIOTransport(t *testing.T) {
	for _, tc := range stdioCases {
		in := []byte(expand(tc.in))
		tr := &mcp.IOTransport{Reader: io.NopCloser(bytes.NewReader(in)), Writer: nopWriteCloser{io.Discard}}
		conn, err := tr.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for {
			msg, err := conn.Read(context.Background())
			if err != nil {
				break
			}
			b, err := jsonrpc.EncodeMessage(msg)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b)
		}
		conn.Close()
		frames, _ := GoStdio(in)
		var want [][]byte
		for _, f := range frames {
			_, b, err := GoSDKDecode(f)
			if err != nil {
				break
			}
			want = append(want, b)
		}
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("%s: IOTransport read %q, GoStdio+GoSDKDecode %q", tc.name, got, want)
		}
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func TestStdioTypeScript(t *testing.T) {
	n := testNode(t)
	for _, tc := range stdioCases {
		msgs, err := n.Stdio([]byte(expand(tc.in)))
		if err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, m := range msgs {
			if m.OK {
				ok++
			}
		}
		if len(msgs) != len(tc.ts) || ok != tc.tsOK {
			t.Errorf("%s: TS ReadBuffer gave %d results, %d accepted; want %d, %d: %+v", tc.name, len(msgs), ok, len(tc.ts), tc.tsOK, msgs)
		}
	}
}
