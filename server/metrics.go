package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// PathMetrics serves the metrics in Prometheus' text format, behind the same authentication as /mcp.
const PathMetrics = "/metrics"

// metrics are what /metrics shows. They live in a registry of the Server's own (no global state), so servers in
// one process (tests) do not mix their counts. Counters and histograms count this process's calls; the gauges
// of sandboxes and approvals read the store at scrape time, so every replica on one database shows the same
// values (aggregate them with max, not sum). A scrape counts the sandboxes' records without opening any of
// their envd tokens.
type metrics struct {
	registry  *prometheus.Registry
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	e2bErrors *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "e2b_mcp_tool_calls_total",
			Help: "Tool calls by tool, policy decision (allow, deny, require_approval, invalid_arguments) and outcome (ok, " +
				"error, denied, declined, pending_approval).",
		}, []string{"tool", "decision", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "e2b_mcp_tool_call_duration_seconds",
			Help: "Time from a tool call's arrival to its result, by tool and outcome (waits for a human included).",
			// From a denied call (well under a millisecond) to a long command or a create (minutes).
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"tool", "outcome"}),
		e2bErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "e2b_mcp_e2b_api_errors_total",
			Help: "Answers of E2B (control plane and envd) with an HTTP status of 400 or more, by status; \"unreachable\" " +
				"counts requests that got no answer. Retried attempts count each.",
		}, []string{"status"}),
	}
	m.registry.MustRegister(m.calls, m.latency, m.e2bErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observeCall counts a finished tool call.
func (m *metrics) observeCall(tool, decision, outcome string, took time.Duration) {
	m.calls.WithLabelValues(tool, decision, outcome).Inc()
	m.latency.WithLabelValues(tool, outcome).Observe(took.Seconds())
}

// watchStore adds the gauges read from the store and the approvals at scrape time.
func (m *metrics) watchStore(store state.Store, approvals *policy.Approvals, now func() time.Time,
	onError func(error)) {
	m.registry.MustRegister(&storeCollector{store: store, approvals: approvals, now: now, onError: onError})
}

// handler serves the registry; a failed gauge is left out of the answer (and logged), the rest still served.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// countingTransport counts E2B's error answers on their way to the e2b client.
type countingTransport struct {
	next   http.RoundTripper
	errors *prometheus.CounterVec
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	switch {
	case err != nil:
		if r.Context().Err() == nil { // a call its caller gave up on is not E2B's error
			t.errors.WithLabelValues("unreachable").Inc()
		}
	case resp.StatusCode >= 400:
		t.errors.WithLabelValues(strconv.Itoa(resp.StatusCode)).Inc()
	}
	return resp, err
}

// httpClient wraps an HTTP client's transport so that E2B's errors are counted.
func (m *metrics) httpClient(c *http.Client) *http.Client {
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out := *c
	out.Transport = countingTransport{next: next, errors: m.e2bErrors}
	return &out
}

var (
	sandboxesDesc = prometheus.NewDesc("e2b_mcp_sandboxes",
		"Sandboxes the store records, by state (running, paused, gone).", []string{"state"}, nil)
	approvalsDesc = prometheus.NewDesc("e2b_mcp_approvals_waiting",
		"Approval requests waiting for a human (not yet approved or expired).", nil, nil)
	ownerHoursDesc = prometheus.NewDesc("e2b_mcp_owner_sandbox_hours",
		"Each owner's sandbox-hours (running time as E2B bills it) this day and this month (UTC), by period (day, "+
			"month).", []string{"owner", "period"}, nil)
	ownerCreatedDesc = prometheus.NewDesc("e2b_mcp_owner_sandboxes_created_month",
		"Sandboxes each owner created this month (UTC), forks included.", []string{"owner"}, nil)
	ownerPeakDesc = prometheus.NewDesc("e2b_mcp_owner_peak_running_month",
		"The most sandboxes each owner had running at once this month (UTC).", []string{"owner"}, nil)
)

// storeCollector reads the gauges from the store when Prometheus scrapes.
type storeCollector struct {
	store     state.Store
	approvals *policy.Approvals
	now       func() time.Time
	onError   func(error)
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- approvalsDesc
	ch <- ownerHoursDesc
	ch <- ownerCreatedDesc
	ch <- ownerPeakDesc
}

// collectUsage reads every owner's use of this month, as e2b-mcp usage shows it.
func (c *storeCollector) collectUsage(ch chan<- prometheus.Metric) {
	now := c.now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	days, err := c.store.Usage("", month)
	if err != nil {
		c.onError(err)
		ch <- prometheus.NewInvalidMetric(ownerHoursDesc, err)
		return
	}
	today := map[string]float64{}
	for _, d := range days {
		if !d.Day.Before(state.DayStart(now)) {
			today[d.Owner] += d.RunningSeconds()
		}
	}
	for _, o := range state.SumUsage(days) {
		ch <- prometheus.MustNewConstMetric(ownerHoursDesc, prometheus.GaugeValue, today[o.Owner]/3600, o.Owner, "day")
		ch <- prometheus.MustNewConstMetric(ownerHoursDesc, prometheus.GaugeValue, o.RunningSeconds/3600, o.Owner, "month")
		ch <- prometheus.MustNewConstMetric(ownerCreatedDesc, prometheus.GaugeValue, float64(o.Created), o.Owner)
		ch <- prometheus.MustNewConstMetric(ownerPeakDesc, prometheus.GaugeValue, float64(o.PeakRunning), o.Owner)
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if counts, err := c.store.SandboxesByState(); err != nil {
		c.onError(err)
		ch <- prometheus.NewInvalidMetric(sandboxesDesc, err)
	} else {
		for _, st := range []string{state.StateRunning, state.StatePaused, state.StateGone} {
			if _, ok := counts[st]; !ok {
				counts[st] = 0 // every state is shown, at zero too
			}
		}
		for st, n := range counts {
			ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), st)
		}
	}
	if pending, err := c.approvals.List(); err != nil {
		c.onError(err)
		ch <- prometheus.NewInvalidMetric(approvalsDesc, err)
	} else {
		waiting := 0
		for _, p := range pending {
			if !p.Answered() {
				waiting++
			}
		}
		ch <- prometheus.MustNewConstMetric(approvalsDesc, prometheus.GaugeValue, float64(waiting))
	}
	c.collectUsage(ch)
}
