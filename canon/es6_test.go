package canon

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"math"
	"strconv"
	"testing"

	"github.com/gowebpki/jcs"
)

var es6Full = flag.Bool("es6-100m", false, "check all 100,000,000 lines of the ES6 number sequence (takes minutes)")

// es6Sequence generates the RFC 8785 author's ES6 number test sequence
// (cyberphone/json-canonicalization, testdata: es6testfile100m.txt): 168
// fixed binary64 bit patterns (zeros, the smallest subnormals, powers of ten
// and thirds across the range, the RFC's appendix B values, round-trip edge
// cases); then the 2,000 consecutive bit patterns starting at the smallest
// normal double 0x0010000000000000; then random doubles: a 32-byte state,
// initially zero, is replaced by its SHA-256 whenever its 8-byte words are
// used up, and each little-endian word is a candidate bit pattern, skipped
// if it is zero, NaN or infinite.
type es6Sequence struct {
	n     int
	block [sha256.Size]byte
	words []byte
}

var es6Fixed = [...]uint64{
	0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x8000000000000001,
	0xc46696695dbd1cc3, 0xc43211ede4974a35, 0xc3fce97ca0f21056, 0xc3c7213080c1a6ac,
	0xc39280f39a348556, 0xc35d9b1f5d20d557, 0xc327af4c4a80aaac, 0xc2f2f2a36ecd5556,
	0xc2be51057e155558, 0xc28840d131aaaaac, 0xc253670dc1555557, 0xc21f0b4935555557,
	0xc1e8d5d42aaaaaac, 0xc1b3de4355555556, 0xc17fca0555555556, 0xc1496e6aaaaaaaab,
	0xc114585555555555, 0xc0e046aaaaaaaaab, 0xc0aa0aaaaaaaaaaa, 0xc074d55555555555,
	0xc040aaaaaaaaaaab, 0xc00aaaaaaaaaaaab, 0xbfd5555555555555, 0xbfa1111111111111,
	0xbf6b4e81b4e81b4f, 0xbf35d867c3ece2a5, 0xbf0179ec9cbd821e, 0xbecbf647612f3696,
	0xbe965e9f80f29212, 0xbe61e54c672874db, 0xbe2ca213d840baf8, 0xbdf6e80fe033c8c6,
	0xbdc2533fe68fd3d2, 0xbd8d51ffd74c861c, 0xbd5774ccac3d3817, 0xbd22c3d6f030f9ac,
	0xbcee0624b3818f79, 0xbcb804ea293472c7, 0xbc833721ba905bd3, 0xbc4ebe9c5db3c61e,
	0xbc18987d17c304e5, 0xbbe3ad30dfcf371d, 0xbbaf7b816618582f, 0xbb792f9ab81379bf,
	0xbb442615600f9499, 0xbb101e77800c76e1, 0xbad9ca58cce0be35, 0xbaa4a1e0a3e6fe90,
	0xba708180831f320d, 0xba3a68cd9e985016, 0x446696695dbd1cc3, 0x443211ede4974a35,
	0x43fce97ca0f21056, 0x43c7213080c1a6ac, 0x439280f39a348556, 0x435d9b1f5d20d557,
	0x4327af4c4a80aaac, 0x42f2f2a36ecd5556, 0x42be51057e155558, 0x428840d131aaaaac,
	0x4253670dc1555557, 0x421f0b4935555557, 0x41e8d5d42aaaaaac, 0x41b3de4355555556,
	0x417fca0555555556, 0x41496e6aaaaaaaab, 0x4114585555555555, 0x40e046aaaaaaaaab,
	0x40aa0aaaaaaaaaaa, 0x4074d55555555555, 0x4040aaaaaaaaaaab, 0x400aaaaaaaaaaaab,
	0x3fd5555555555555, 0x3fa1111111111111, 0x3f6b4e81b4e81b4f, 0x3f35d867c3ece2a5,
	0x3f0179ec9cbd821e, 0x3ecbf647612f3696, 0x3e965e9f80f29212, 0x3e61e54c672874db,
	0x3e2ca213d840baf8, 0x3df6e80fe033c8c6, 0x3dc2533fe68fd3d2, 0x3d8d51ffd74c861c,
	0x3d5774ccac3d3817, 0x3d22c3d6f030f9ac, 0x3cee0624b3818f79, 0x3cb804ea293472c7,
	0x3c833721ba905bd3, 0x3c4ebe9c5db3c61e, 0x3c18987d17c304e5, 0x3be3ad30dfcf371d,
	0x3baf7b816618582f, 0x3b792f9ab81379bf, 0x3b442615600f9499, 0x3b101e77800c76e1,
	0x3ad9ca58cce0be35, 0x3aa4a1e0a3e6fe90, 0x3a708180831f320d, 0x3a3a68cd9e985016,
	0x4024000000000000, 0x4014000000000000, 0x3fe0000000000000, 0x3fa999999999999a,
	0x3f747ae147ae147b, 0x3f40624dd2f1a9fc, 0x3f0a36e2eb1c432d, 0x3ed4f8b588e368f1,
	0x3ea0c6f7a0b5ed8d, 0x3e6ad7f29abcaf48, 0x3e35798ee2308c3a, 0x3ed539223589fa95,
	0x3ed4ff26cd5a7781, 0x3ed4f95a762283ff, 0x3ed4f8c60703520c, 0x3ed4f8b72f19cd0d,
	0x3ed4f8b5b31c0c8d, 0x3ed4f8b58d1c461a, 0x3ed4f8b5894f7f0e, 0x3ed4f8b588ee37f3,
	0x3ed4f8b588e47da4, 0x3ed4f8b588e3849c, 0x3ed4f8b588e36bb5, 0x3ed4f8b588e36937,
	0x3ed4f8b588e368f8, 0x3ed4f8b588e368f1, 0x3ff0000000000000, 0xbff0000000000000,
	0xbfeffffffffffffa, 0xbfeffffffffffffb, 0x3feffffffffffffa, 0x3feffffffffffffb,
	0x3feffffffffffffc, 0x3feffffffffffffe, 0xbfefffffffffffff, 0xbfefffffffffffff,
	0x3fefffffffffffff, 0x3fefffffffffffff, 0x3fd3333333333332, 0x3fd3333333333333,
	0x3fd3333333333334, 0x0010000000000000, 0x000ffffffffffffd, 0x000fffffffffffff,
	0x7fefffffffffffff, 0xffefffffffffffff, 0x4340000000000000, 0xc340000000000000,
	0x4430000000000000, 0x44b52d02c7e14af5, 0x44b52d02c7e14af6, 0x44b52d02c7e14af7,
	0x444b1ae4d6e2ef4e, 0x444b1ae4d6e2ef4f, 0x444b1ae4d6e2ef50, 0x3eb0c6f7a0b5ed8c,
	0x3eb0c6f7a0b5ed8d, 0x41b3de4355555553, 0x41b3de4355555554, 0x41b3de4355555555,
	0x41b3de4355555556, 0x41b3de4355555557, 0xbecbf647612f3696, 0x43143ff3c1cb0959,
}

const es6Serial = 2000

func (s *es6Sequence) next() uint64 {
	defer func() { s.n++ }()
	switch {
	case s.n < len(es6Fixed):
		return es6Fixed[s.n]
	case s.n < len(es6Fixed)+es6Serial:
		return 0x0010000000000000 + uint64(s.n-len(es6Fixed))
	}
	for {
		if len(s.words) == 0 {
			s.block = sha256.Sum256(s.block[:])
			s.words = s.block[:]
		}
		bits := binary.LittleEndian.Uint64(s.words)
		s.words = s.words[8:]
		if f := math.Float64frombits(bits); f != 0 && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return bits
		}
	}
}

// TestES6Numbers reproduces the published SHA-256 of the sequence's text,
// lines "<hex bits>,<ES6 text>\n", with the ES6 text from canon's formatter.
// For every value it also checks that formatter against jcs.NumberToJSON and
// that canon's policies decide the value's text consistently.
func TestES6Numbers(t *testing.T) {
	if len(es6Fixed) != 168 {
		t.Fatalf("%d fixed values, want 168", len(es6Fixed))
	}
	checkpoints := []struct {
		lines int
		hash  string
	}{
		{1_000, "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687"},
		{1_000_000, "49415fee2c56c77864931bd3624faad425c3c577d6d74e89a83bc725506dad16"},
		{100_000_000, "0f7dda6b0837dde083c5d6b896f7d62340c8a2415b0c7121d83145e08a755272"},
	}
	switch {
	case *es6Full:
	case testing.Short():
		checkpoints = checkpoints[:1]
	default:
		checkpoints = checkpoints[:2]
	}
	var seq es6Sequence
	h := sha256.New()
	var line, spelled, lit []byte
	for n := 1; n <= checkpoints[len(checkpoints)-1].lines; n++ {
		bits := seq.next()
		f := math.Float64frombits(bits)
		line = strconv.AppendUint(line[:0], bits, 16)
		line = append(line, ',')
		text := len(line)
		line = formatES6(line, f)
		want := line[text:]
		line = append(line, '\n')
		h.Write(line)

		if j, err := jcs.NumberToJSON(f); err != nil || j != string(want) {
			t.Fatalf("line %d (%x): canon writes %s, jcs.NumberToJSON %s (%v)", n, bits, want, j, err)
		}
		// The policies, reading the ES6 text and (every 7th line) Go's
		// shortest exponent spelling "1.5e+09" of the same value.
		lit = want
		if n%7 == 0 {
			spelled = strconv.AppendFloat(spelled[:0], f, 'e', -1, 64)
			lit = spelled
		}
		isInt := f == math.Trunc(f)
		safe := isInt && math.Abs(f) <= MaxSafeInteger
		for _, p := range []Policy{PolicyV02, PolicyMCPDecl} {
			got, why := appendNumber(nil, lit, p)
			admit := safe || (p == PolicyMCPDecl && !isInt)
			if admit != (why == "") || (admit && string(got) != string(want)) {
				t.Fatalf("line %d (%x): %s under %s = %q (%s), want admitted=%v text %s", n, bits, lit, p, got, why, admit, want)
			}
		}
		for _, c := range checkpoints {
			if c.lines == n {
				if got := hex.EncodeToString(h.Sum(nil)); got != c.hash {
					t.Errorf("SHA-256 of the first %d lines = %s, want %s", n, got, c.hash)
				}
			}
		}
	}
}
