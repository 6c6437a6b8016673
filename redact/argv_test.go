package redact

import (
	"slices"
	"strings"
	"testing"
)

func TestArgv(t *testing.T) {
	gh := "ghp_" + gen(alnum, 36)
	tests := []struct {
		in, want []string
	}{
		{[]string{"srv", "--api-key", "hunter2", "--port", "80"}, []string{"srv", "--api-key", "[REDACTED:secret_name]", "--port", "80"}},
		{[]string{"srv", "--token=abc", "--verbose"}, []string{"srv", "--token=[REDACTED:secret_name]", "--verbose"}},
		{[]string{"mysql", "-u", "root", "-p", "secret"}, []string{"mysql", "-u", "root", "-p", "[REDACTED:secret_name]"}},
		{[]string{"srv", "-p", "8080"}, []string{"srv", "-p", "8080"}},
		{[]string{"env", "API_KEY=abc", "HOME=/root", "DB_PASSWORD=", "x=1"}, []string{"env", "API_KEY=[REDACTED:secret_name]", "HOME=/root", "DB_PASSWORD=", "x=1"}},
		{[]string{"srv", "--password", "--verbose"}, []string{"srv", "--password", "--verbose"}},
		{[]string{"srv", "--header", "Authorization: Bearer " + gen(alnum, 30)}, []string{"srv", "--header", "[REDACTED:authorization]"}},
		{[]string{"srv", "--header=Authorization: Bearer " + gen(alnum, 30)}, []string{"srv", "--header=[REDACTED:authorization]"}},
		{[]string{"srv", gh}, []string{"srv", "[REDACTED:github_token]"}},
		{[]string{"srv", "GH=" + gh}, []string{"srv", "GH=[REDACTED:github_token]"}},
		{[]string{"srv", "--", "--client-secret", "s"}, []string{"srv", "--", "--client-secret", "[REDACTED:secret_name]"}},
		{[]string{"npx", "-y", "@modelcontextprotocol/server-everything", "--max-tokens", "100", "--token-file", "/run/t"},
			[]string{"npx", "-y", "@modelcontextprotocol/server-everything", "--max-tokens", "100", "--token-file", "/run/t"}},
	}
	for _, tt := range tests {
		orig := slices.Clone(tt.in)
		got, idx := Argv(tt.in, nil)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Argv(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if !slices.Equal(tt.in, orig) {
			t.Errorf("Argv modified its input: %q", tt.in)
		}
		var wantIdx []int
		for i := range tt.want {
			if tt.want[i] != tt.in[i] {
				wantIdx = append(wantIdx, i)
			}
		}
		if !slices.Equal(idx, wantIdx) {
			t.Errorf("Argv(%q) indices %v, want %v", tt.in, idx, wantIdx)
		}
		again, idx2 := Argv(got, nil)
		if !slices.Equal(again, got) || len(idx2) != 0 {
			t.Errorf("not idempotent: %q -> %q %v", got, again, idx2)
		}
	}
}

func TestArgvEveryClass(t *testing.T) {
	for _, s := range samples() {
		for _, argv := range [][]string{{"srv", s.value}, {"srv", "--opt", "x " + s.value}} {
			last := len(argv) - 1
			want := "[REDACTED:" + string(s.class) + "]"
			if name, _, assign := splitArg(argv[last]); assign && secretName(name) {
				want = name + "=[REDACTED:secret_name]" // AWS_SECRET_ACCESS_KEY=..., password=...
			}
			got, idx := Argv(argv, nil)
			if len(idx) != 1 || idx[0] != last || got[last] != want {
				t.Errorf("%s: Argv(%q) = %q %v, want %s", s.class, argv, got, idx, want)
			}
		}
		got, idx := Argv([]string{"srv", "--opt=" + s.value}, nil)
		if len(idx) != 1 || got[1] != "--opt=[REDACTED:"+string(s.class)+"]" {
			t.Errorf("%s: --opt=VALUE: %q %v", s.class, got, idx)
		}
	}
	for _, s := range notSecrets() {
		if _, idx := Argv([]string{"srv", s, "--opt=" + s}, nil); len(idx) != 0 {
			t.Errorf("%q redacted in argv", s)
		}
	}
	// Nothing of a secret is left anywhere in the output.
	for _, s := range samples() {
		got, _ := Argv([]string{"srv", "--api-key", s.value, "--x=" + s.value, s.value}, nil)
		if strings.Contains(strings.Join(got, " "), s.value) {
			t.Errorf("%s survived: %q", s.class, got)
		}
	}
}
