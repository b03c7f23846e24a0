package display

import "fmt"

// Size shows a count of bytes the way a person reads it: in bytes below a KiB, else in the largest binary unit it
// reaches, to one decimal (3.4 KiB, 10.0 MiB).
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
