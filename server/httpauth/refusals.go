package httpauth

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// A client address may have refusalBurst bearer tokens refused at once, then one per refusalEvery. Past that, its
// refused tokens are no longer logged one by one, and their 401 carries Retry-After, so that a client retrying a
// revoked token in a loop, or anyone sending forged ones, is told to back off and cannot flood the log. The
// answer stays the 401 with its challenge: many members can share an address (the TLS proxy in front of a team
// server, a NAT), clients start their sign-in on a 401, and one caller's junk must not keep another from being
// told that their token expired. Every token is still checked, so a valid one is let in; checking a forged one
// costs a signature check at most (the provider's keys are fetched at most once a minute, see server/oauth).
const (
	refusalBurst = 20
	refusalEvery = time.Second
)

// Whatever the addresses, the log takes at most logBurst refusals at once and one per logEvery: an attacker with
// many addresses (an IPv6 /48 holds 65,536 /64s) cannot flood it either.
const (
	logBurst = 100
	logEvery = 100 * time.Millisecond
)

// maxRefusalAddrs bounds the addresses whose refusals are counted. When the table is full, the addresses whose
// budget has refilled are forgotten, and failing that any one address is, so that a new address always gets a
// budget of its own.
const maxRefusalAddrs = 4096

// refusals counts refused tokens per client address: an IPv4 address, or an IPv6 /64 (what one host is usually
// given). Safe for concurrent use.
type refusals struct {
	now func() time.Time
	log *rate.Limiter

	mu        sync.Mutex
	byAddr    map[netip.Prefix]*rate.Limiter
	lastSweep time.Time
}

func newRefusals(now func() time.Time) *refusals {
	return &refusals{now: now, log: rate.NewLimiter(rate.Every(logEvery), logBurst),
		byAddr: map[netip.Prefix]*rate.Limiter{}}
}

// refuse records a refused token from addr (an address, with or without a port) and returns how long the address
// should wait before its next attempt (0 while it is within its budget), and whether this refusal is logged.
func (r *refusals) refuse(addr string) (wait time.Duration, logIt bool) {
	key := addrKey(addr)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	lim, ok := r.byAddr[key]
	if !ok {
		if len(r.byAddr) >= maxRefusalAddrs {
			r.makeRoomLocked(now)
		}
		lim = rate.NewLimiter(rate.Every(refusalEvery), refusalBurst)
		r.byAddr[key] = lim
	}
	if lim.AllowN(now, 1) {
		return 0, r.log.AllowN(now, 1)
	}
	missing := 1 - lim.TokensAt(now)
	return time.Duration(missing * float64(refusalEvery)), false
}

// makeRoomLocked forgets the addresses whose budget has refilled, or, when none has, any one address: its
// refusals are counted afresh should it come back. r.mu must be held.
func (r *refusals) makeRoomLocked(now time.Time) {
	r.sweepLocked(now)
	for key := range r.byAddr {
		if len(r.byAddr) < maxRefusalAddrs {
			return
		}
		delete(r.byAddr, key)
	}
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

// addrKey is the budget's key for addr (host:port, as http.Request.RemoteAddr, or a bare address, as a proxy's
// header gives it): the IPv4 address, or the IPv6 address's /64. An address that does not parse shares the zero
// key.
func addrKey(addr string) netip.Prefix {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return netip.Prefix{}
		}
		ip = ap.Addr()
	}
	ip = ip.Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// clientAddr is the address of the client that sent r: the last entry of header (the one the trusted proxy in
// front added; whatever came before it, the client wrote) when header is set and holds an address, else the
// connection's.
func clientAddr(r *http.Request, header string) string {
	if header == "" {
		return r.RemoteAddr
	}
	values := r.Header.Values(header)
	if len(values) == 0 {
		return r.RemoteAddr
	}
	last := values[len(values)-1]
	last = strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:])
	if addrKey(last).IsValid() {
		return last
	}
	return r.RemoteAddr
}
