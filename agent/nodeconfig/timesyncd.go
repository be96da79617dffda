package nodeconfig

import "strings"

// TimesyncdDropIn is the drop-in that points systemd-timesyncd at the
// platform's time servers. The image does not enable timesyncd: the agent
// starts it once this file is written, so it never runs on the image's
// defaults while the instance's own servers are known.
const TimesyncdDropIn = "/etc/systemd/timesyncd.conf.d/80-drover.conf"

// TimesyncdConfig renders TimesyncdDropIn from the instance's time servers
// (ECS ntp-conf/ntp-servers, already checked to be host names or
// addresses). Without any it sets nothing: timesyncd then uses the servers
// DHCP hands out and, failing those, its compiled-in FallbackNTP — the
// join does not wait for time servers the metadata does not name.
func TimesyncdConfig(f Facts) []byte {
	var b strings.Builder
	b.WriteString("# Rendered by drover-agent from the instance metadata (ntp-conf/ntp-servers); see docs/agent.md.\n")
	if len(f.NTPServers) == 0 {
		b.WriteString("# The metadata names no time servers: timesyncd's defaults apply (DHCP, then FallbackNTP).\n[Time]\n")
		return []byte(b.String())
	}
	b.WriteString("[Time]\nNTP=" + strings.Join(f.NTPServers, " ") + "\n")
	return []byte(b.String())
}
