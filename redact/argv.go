package redact

import "strings"

// Argv redacts a command line (a server's argv, argv[0] included) and
// returns a new slice and the ascending indices it changed; argv itself is
// not modified. rules nil means Default(). An entry is changed when:
//
//   - it is the value of a flag with a secret-like name, given as
//     "--api-key=VALUE" (the value part is replaced: "--api-key=[REDACTED:secret_name]")
//     or as "--api-key VALUE" (the next entry is replaced, unless it starts
//     with '-', which is taken as the next flag);
//   - it follows "-p" (a password in mysql and many CLIs), unless it is all
//     digits (a port);
//   - it is an environment assignment NAME=VALUE with a secret-like NAME
//     (the value part is replaced);
//   - a built-in detector or an operator pattern matches it (the value part
//     of a "--flag=VALUE" or NAME=VALUE entry, else the whole entry).
//
// A value glued to a short flag ("-psecret") is not recognized as one, and
// a secret value that starts with '-' after its flag is taken for a flag
// (unless a detector knows its shape).
//
// Markers are "[REDACTED:<class>]" without JSON quotes; an entry that
// already is (or ends in) a marker is left alone, so Argv is idempotent.
func Argv(argv []string, rules *Rules) ([]string, []int) {
	if rules == nil {
		rules = Default()
	}
	out := make([]string, len(argv))
	copy(out, argv)
	var changed []int
	const (
		none = iota
		secretNext
		passwordNext // after -p: not a port
	)
	pending := none
	var sc scratch
	for i, a := range argv {
		p := pending
		pending = none
		if argMarker(a) {
			continue
		}
		if p != none && !strings.HasPrefix(a, "-") && (p == secretNext || !allDigits(a)) {
			out[i] = argMarkerOf(classSecretName)
			changed = append(changed, i)
			continue
		}
		name, value, assign := splitArg(a)
		if assign {
			if argMarker(value) {
				continue
			}
			c := Class("")
			if rules.defaults && secretName(name) && value != "" {
				c = classSecretName
			} else {
				c = rules.classify([]byte(value), &sc)
			}
			if c != "" {
				out[i] = a[:len(a)-len(value)] + argMarkerOf(c)
				changed = append(changed, i)
			}
			continue
		}
		if rules.defaults && strings.HasPrefix(a, "-") {
			switch {
			case a == "-p":
				pending = passwordNext
			case a != "--" && secretName(name):
				pending = secretNext
			}
		}
		if c := rules.classify([]byte(a), &sc); c != "" {
			out[i] = argMarkerOf(c)
			changed = append(changed, i)
		}
	}
	return out, changed
}

// splitArg splits "--name=value" and "NAME=value" (NAME an environment
// variable name); assign is false for anything else.
func splitArg(a string) (name, value string, assign bool) {
	if strings.HasPrefix(a, "-") {
		name = strings.TrimLeft(a, "-")
		if eq := strings.IndexByte(name, '='); eq > 0 {
			return name[:eq], name[eq+1:], true
		}
		return name, "", false
	}
	eq := strings.IndexByte(a, '=')
	if eq <= 0 {
		return "", "", false
	}
	for j := 0; j < eq; j++ {
		c := a[j]
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (j == 0 || c < '0' || c > '9') {
			return "", "", false
		}
	}
	return a[:eq], a[eq+1:], true
}

func argMarkerOf(c Class) string { return "[REDACTED:" + string(c) + "]" }

// argMarker reports whether a is exactly an argv marker.
func argMarker(a string) bool {
	const pre, post = "[REDACTED:", "]"
	if len(a) <= len(pre)+len(post) || !strings.HasPrefix(a, pre) || !strings.HasSuffix(a, post) {
		return false
	}
	for _, c := range []byte(a[len(pre) : len(a)-len(post)]) {
		if (c < 'a' || c > 'z') && c != '_' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
