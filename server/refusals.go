package server

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// A remote address may have refusalBurst bearer tokens refused at once, then one per refusalEvery. Past that, its
// refused tokens are answered 429 with Retry-After instead of 401 and are not logged one by one, so that a client
// retrying a revoked token in a loop, or anyone sending forged ones, is told to back off and cannot flood the
// log. Its tokens are still checked: a valid one is let in, because many members can share an address (a proxy,
// a NAT) and one of them must not lock the others out.
const (
	refusalBurst = 20
	refusalEvery = time.Second
)

// maxRefusalAddrs bounds the addresses whose refusals are counted. An address whose budget has refilled is
// forgotten when room is needed; while the table is full of addresses still within their budget, a new address
// is treated as over its own (its refused tokens get 429, its valid ones are still let in).
const maxRefusalAddrs = 4096

// refusals counts refused tokens per remote address: an IPv4 address, or an IPv6 /64 (what one host is usually
// given). Safe for concurrent use.
type refusals struct {
	now func() time.Time

	mu        sync.Mutex
	byAddr    map[netip.Prefix]*rate.Limiter
	lastSweep time.Time
}

func newRefusals(now func() time.Time) *refusals {
	return &refusals{now: now, byAddr: map[netip.Prefix]*rate.Limiter{}}
}

// refuse records a refused token from remoteAddr (host:port, as http.Request.RemoteAddr) and returns how long the
// address should wait before its next attempt: 0 while it is within its budget.
func (r *refusals) refuse(remoteAddr string) time.Duration {
	key := addrKey(remoteAddr)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	lim, ok := r.byAddr[key]
	if !ok {
		if len(r.byAddr) >= maxRefusalAddrs {
			r.sweepLocked(now)
		}
		if len(r.byAddr) >= maxRefusalAddrs {
			return refusalEvery
		}
		lim = rate.NewLimiter(rate.Every(refusalEvery), refusalBurst)
		r.byAddr[key] = lim
	}
	if lim.AllowN(now, 1) {
		return 0
	}
	missing := 1 - lim.TokensAt(now)
	return time.Duration(missing * float64(refusalEvery))
}

// sweepLocked forgets the addresses whose budget has refilled (they are as good as new), at most once per
// refusalEvery so that a full table does not cost a scan per request. r.mu must be held.
func (r *refusals) sweepLocked(now time.Time) {
	if now.Sub(r.lastSweep) < refusalEvery {
		return
	}
	r.lastSweep = now
	for key, lim := range r.byAddr {
		if lim.TokensAt(now) >= refusalBurst {
			delete(r.byAddr, key)
		}
	}
}

// addrKey is the budget's key for remoteAddr: the IPv4 address, or the IPv6 address's /64. An address that does
// not parse (a handler mounted behind something that sets RemoteAddr otherwise) shares the zero key.
func addrKey(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	addr := ap.Addr().Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}
