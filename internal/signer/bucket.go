package signer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate is a token bucket's refill: N signatures per Per, in bursts of at
// most N.
type Rate struct {
	N   int
	Per time.Duration
}

// ParseRate reads "N/s", "N/m" or "N/h" (N a positive integer).
func ParseRate(s string) (Rate, error) {
	n, unit, ok := strings.Cut(s, "/")
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	v, err := strconv.Atoi(n)
	if !ok || per == 0 || err != nil || v <= 0 || v > 1_000_000 {
		return Rate{}, fmt.Errorf("rate %q: want N/s, N/m or N/h with N from 1 to 1000000", s)
	}
	return Rate{N: v, Per: per}, nil
}

func (r Rate) String() string {
	u := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	return strconv.Itoa(r.N) + "/" + u
}

// bucket is a token bucket: it holds at most rate.N tokens, refilled
// continuously at rate.N per rate.Per; each signature takes one.
type bucket struct {
	rate   Rate
	tokens float64
	last   time.Time
}

func newBucket(r Rate, now time.Time) (*bucket, error) {
	if r.N <= 0 || r.Per <= 0 {
		return nil, errors.New("rate: N and Per must be positive")
	}
	return &bucket{rate: r, tokens: float64(r.N), last: now}, nil
}

// take takes a token at now, or reports when the next one is due.
func (b *bucket) take(now time.Time) (ok bool, wait time.Duration) {
	if d := now.Sub(b.last); d > 0 { // a clock that steps back refills nothing
		b.tokens = min(float64(b.rate.N), b.tokens+float64(b.rate.N)*float64(d)/float64(b.rate.Per))
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(b.rate.Per) / float64(b.rate.N))
}
