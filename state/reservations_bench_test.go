package state

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkReserveSandboxes is the cost of the cap check of one create: a reservation and the record that takes
// its place, for owners taken in turn from 1,000 that each hold a few sandboxes. It reports the p50 and p99 of
// one check (the reservation alone) besides the mean of the pair.
func BenchmarkReserveSandboxes(b *testing.B) {
	forEachStoreB(b, func(b *testing.B, k storeKind) {
		const owners, each = 1000, 3
		s, clock := k.newTestStore(b)
		for o := range owners {
			for i := range each {
				r := sampleSandbox(fmt.Sprintf("owner%04d", o), fmt.Sprintf("sbx%d", i), "main", clock.Now())
				if err := s.PutSandbox(r); err != nil {
					b.Fatal(err)
				}
			}
		}
		caps := SandboxCaps{Live: 1 << 30, Running: 1 << 30}
		var checks []time.Duration
		i := 0
		for b.Loop() {
			owner := fmt.Sprintf("owner%04d", i%owners)
			start := time.Now()
			res, err := s.ReserveSandboxes(owner, SlotNew, 1, caps, time.Hour)
			checks = append(checks, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			if err := s.PutReservedSandbox(res, sampleSandbox(owner, fmt.Sprintf("new%08d", i), "main", clock.Now())); err != nil {
				b.Fatal(err)
			}
			i++
		}
		slices.Sort(checks)
		b.ReportMetric(float64(checks[len(checks)/2].Microseconds()), "p50-µs/check")
		b.ReportMetric(float64(checks[len(checks)*99/100].Microseconds()), "p99-µs/check")
	})
}
