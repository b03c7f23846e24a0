package e2btest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
)

// Faults make the emulator misbehave the way a real network and a busy E2B do, so that retries, reconciliation
// and error paths can be tested. The zero value injects nothing.
type Faults struct {
	// Latency is added before every request (both planes) is answered.
	Latency time.Duration
	// FailRate is the share (0..1) of control-plane requests answered with FailStatus instead of being served;
	// which ones is decided by a random source seeded with Seed, so a run is repeatable.
	FailRate   float64
	FailStatus int // default 503
	Seed       uint64
	// RetryAfter is sent as Retry-After (whole seconds, rounded up) on injected 429 and 503 answers; default 1 s.
	// Negative sends no Retry-After.
	RetryAfter time.Duration
	// HTMLBody makes injected failures answer with an HTML page, as a load balancer in front of E2B does,
	// instead of E2B's JSON error.
	HTMLBody bool
	// RefuseCreate: the next N creates are answered with RefuseCreateStatus (default 503) without being performed,
	// while other requests are served.
	RefuseCreate       int
	RefuseCreateStatus int
	// CutAfterCreate: the next N creates (POST /sandboxes) are performed (the sandbox exists) but the connection
	// is closed before any response is written, so the client cannot know the outcome.
	CutAfterCreate int
	// FailAfterCreate: the next N creates are performed and then answered with FailAfterCreateStatus
	// (default 502), as a proxy does when E2B's answer is lost behind it.
	FailAfterCreate       int
	FailAfterCreateStatus int
	// CutStreamAfterFrames makes envd cut streaming responses (process output, directory watches) after this many
	// frames, closing the connection mid-stream; 0 disables. Applied by the envd emulation.
	CutStreamAfterFrames int
}

// SetFaults replaces the fault configuration; counters (RefuseCreate, CutAfterCreate, FailAfterCreate) and failures
// queued with FailNext start afresh.
func (s *Server) SetFaults(f Faults) { s.faults.set(f) }

// FailNext answers the next n control-plane requests with status (429 carries Retry-After), before any other
// fault applies and without serving them: a create answered this way did not create anything.
func (s *Server) FailNext(n, status int) { s.faults.failNext(n, status) }

// CurrentFaults returns the fault configuration with the counters as they are now.
func (s *Server) CurrentFaults() Faults { return s.faults.current() }

type faultInjector struct {
	mu   sync.Mutex
	f    Faults
	rnd  *rand.Rand
	next []int
	hold *createHold
}

// createHold keeps performed creates from answering, so that a test can kill its client between E2B's create and
// the client's own record of the sandbox.
type createHold struct {
	created  chan string
	released chan struct{}
}

// HoldCreates makes every create performed from now on wait before it answers, with the sandbox already made,
// until release is called or the client goes away. The ID of each held create's sandbox is sent on created
// (buffered; IDs beyond its capacity are dropped rather than blocking the emulator).
func (s *Server) HoldCreates() (created <-chan string, release func()) {
	h := &createHold{created: make(chan string, 64), released: make(chan struct{})}
	s.faults.mu.Lock()
	s.faults.hold = h
	s.faults.mu.Unlock()
	var once sync.Once
	return h.created, func() {
		once.Do(func() {
			s.faults.mu.Lock()
			if s.faults.hold == h {
				s.faults.hold = nil
			}
			s.faults.mu.Unlock()
			close(h.released)
		})
	}
}

// holdCreate blocks a performed create while HoldCreates is in force; false means the client went away meanwhile.
func (fi *faultInjector) holdCreate(ctx context.Context, sandboxID string) bool {
	fi.mu.Lock()
	h := fi.hold
	fi.mu.Unlock()
	if h == nil {
		return true
	}
	select {
	case h.created <- sandboxID:
	default:
	}
	select {
	case <-h.released:
		return true
	case <-ctx.Done():
		return false
	}
}

func newFaultInjector() *faultInjector { return &faultInjector{rnd: rand.New(rand.NewPCG(0, 0))} }

func (fi *faultInjector) set(f Faults) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.f = f
	fi.rnd = rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))
	fi.next = nil
}

func (fi *faultInjector) failNext(n, status int) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	for range n {
		fi.next = append(fi.next, status)
	}
}

func (fi *faultInjector) current() Faults {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	return fi.f
}

// delay waits Latency, or until the request is abandoned.
func (fi *faultInjector) delay(ctx context.Context) {
	fi.mu.Lock()
	d := fi.f.Latency
	fi.mu.Unlock()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// controlPlane answers r with an injected failure when one is due and reports whether it did.
func (fi *faultInjector) controlPlane(w http.ResponseWriter, r *http.Request) bool {
	fi.mu.Lock()
	status := 0
	if len(fi.next) > 0 {
		status, fi.next = fi.next[0], fi.next[1:]
	} else if fi.f.FailRate > 0 && fi.rnd.Float64() < fi.f.FailRate {
		status = fi.f.FailStatus
		if status == 0 {
			status = http.StatusServiceUnavailable
		}
	}
	f := fi.f
	fi.mu.Unlock()
	if status == 0 {
		return false
	}
	writeInjected(w, status, f)
	return true
}

// refuseCreate returns the status to refuse a create with before performing it, or 0.
func (fi *faultInjector) refuseCreate() int {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if fi.f.RefuseCreate <= 0 {
		return 0
	}
	fi.f.RefuseCreate--
	if fi.f.RefuseCreateStatus == 0 {
		return http.StatusServiceUnavailable
	}
	return fi.f.RefuseCreateStatus
}

// afterCreate says what to do with a create that has just been performed: cut the connection, answer with a
// failure status, or (both false) answer normally.
func (fi *faultInjector) afterCreate() (cut bool, failStatus int) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if fi.f.CutAfterCreate > 0 {
		fi.f.CutAfterCreate--
		return true, 0
	}
	if fi.f.FailAfterCreate > 0 {
		fi.f.FailAfterCreate--
		st := fi.f.FailAfterCreateStatus
		if st == 0 {
			st = http.StatusBadGateway
		}
		return false, st
	}
	return false, 0
}

// hijackAndClose drops the connection without an answer, as a network failure after the request was sent does.
func hijackAndClose(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: the server resets the stream instead
	}
	_ = conn.Close()
}

func writeInjected(w http.ResponseWriter, status int, f Faults) {
	if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && f.RetryAfter >= 0 {
		ra := f.RetryAfter
		if ra == 0 {
			ra = time.Second
		}
		secs := int64((ra + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if f.HTMLBody {
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<html><head>\n<meta http-equiv=\"content-type\" content=\"text/html;charset=utf-8\">\n"+
			"<title>%d %s</title>\n</head>\n<body text=#000000 bgcolor=#ffffff>\n<h1>Error: %s</h1>\n"+
			"<h2>The server encountered a temporary error and could not complete your request.<p>Please try again in 30 "+
			"seconds.</h2>\n<h2></h2>\n</body></html>\n", status, http.StatusText(status), http.StatusText(status))
		return
	}
	msg := http.StatusText(status)
	if status == http.StatusTooManyRequests {
		msg = "Rate limit exceeded, please try again later."
	}
	emulator.WriteError(w, status, msg)
}
