package transcript

import "strings"

// Correlation metadata bounds (spec/transcript.md, "Correlation").
const (
	// maxCorrelationIDLen is the safe-shape cap of a caller correlation id
	// (seeds/correlation-id.txt): over it the id is invalid, never truncated,
	// since truncation would forge a different id.
	maxCorrelationIDLen = 128
	// maxTraceparentLen bounds a traceparent. Version 00 is exactly 55
	// characters; later versions may append fields, up to this cap.
	maxTraceparentLen = 512
	// maxTracestateLen and maxTracestateMembers follow W3C Trace Context:
	// at most 32 list members, and 512 characters is what every vendor must
	// propagate. Longer values are recorded as invalid, not cut.
	maxTracestateLen     = 512
	maxTracestateMembers = 32
)

// checkCorrelationID returns "" when s has the safe shape of a caller
// correlation id (1 to 128 characters of [A-Za-z0-9_-]),
// or the reason it does not (CorrTooLong, CorrBadCharset, CorrBadShape).
func checkCorrelationID(s string) string {
	if s == "" {
		return CorrBadShape
	}
	if len(s) > maxCorrelationIDLen {
		return CorrTooLong
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return CorrBadCharset
		}
	}
	return ""
}

// checkTraceparent returns "" when s is a W3C traceparent
// (version-traceid-parentid-flags, lowercase hex, ids not all zero, version
// not ff; version 00 exactly 55 characters, later versions at least 55 with
// a '-' after the flags), or the reason it is not.
func checkTraceparent(s string) string {
	if len(s) > maxTraceparentLen {
		return CorrTooLong
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return CorrBadCharset
		}
	}
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return CorrBadShape
	}
	version, traceID, parentID, flags := s[0:2], s[3:35], s[36:52], s[53:55]
	if !lowerHex(version) || !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(flags) {
		return CorrBadShape
	}
	if version == "ff" || allZero(traceID) || allZero(parentID) {
		return CorrBadShape
	}
	if version == "00" && len(s) != 55 {
		return CorrBadShape
	}
	if len(s) > 55 && s[55] != '-' {
		return CorrBadShape
	}
	return ""
}

// checkTracestate returns "" when s is a W3C tracestate list (at most
// 32 key=value members, no key twice, empty members
// allowed between commas), or the reason it is not.
func checkTracestate(s string) string {
	if len(s) > maxTracestateLen {
		return CorrTooLong
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < 0x20 || s[i] > 0x7e) && s[i] != '\t' {
			return CorrBadCharset
		}
	}
	seen := map[string]bool{}
	n := 0
	for _, m := range strings.Split(s, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		n++
		if n > maxTracestateMembers {
			return CorrBadShape
		}
		k, v, ok := strings.Cut(m, "=")
		if !ok || !tracestateKey(k) || !tracestateValue(v) || seen[k] {
			return CorrBadShape
		}
		seen[k] = true
	}
	if n == 0 {
		return CorrBadShape
	}
	return ""
}

// tracestateKey: simple-key = lcalpha 0*255(lcalpha / DIGIT / "_" / "-"/ "*" / "/"),
// multi-tenant-key = tenant-id "@" system-id, tenant-id = (lcalpha / DIGIT)
// 0*240(keychar), system-id = lcalpha 0*13(keychar).
func tracestateKey(k string) bool {
	keychar := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/'
	}
	all := func(s string) bool {
		for i := 1; i < len(s); i++ {
			if !keychar(s[i]) {
				return false
			}
		}
		return true
	}
	if tenant, system, multi := strings.Cut(k, "@"); multi {
		if len(tenant) < 1 || len(tenant) > 241 || len(system) < 1 || len(system) > 14 {
			return false
		}
		t0, s0 := tenant[0], system[0]
		return (t0 >= 'a' && t0 <= 'z' || t0 >= '0' && t0 <= '9') && all(tenant) && s0 >= 'a' && s0 <= 'z' && all(system)
	}
	if len(k) < 1 || len(k) > 256 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	return all(k)
}

// tracestateValue: 0*255(chr) nblk-chr, chr = %x20 / nblk-chr,
// nblk-chr = %x21-2B / %x2D-3C / %x3E-7E.
func tracestateValue(v string) bool {
	if len(v) < 1 || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool { return strings.Trim(s, "0") == "" }
