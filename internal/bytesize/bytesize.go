// Package bytesize formats byte counts for people (binary units).
package bytesize

import "fmt"

// Format renders n as "512 B", "1.5 KiB", "92.1 MiB", "1.0 GiB", …
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
