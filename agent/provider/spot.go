package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SpotTerminationKey is where the ECS metadata service announces that a
// spot instance will be reclaimed: a UTC time once the reclaim is
// scheduled, 404 before (docs/node-config.md, "Spot instances").
const SpotTerminationKey = "instance/spot/termination-time"

// spotPollTimeout bounds one poll: the next one is seconds away.
const spotPollTimeout = 5 * time.Second

// SpotTermination asks the metadata service, uncached, whether the
// instance is to be reclaimed and when. A 404 is no notice. So is any
// answer that is not a time (the service's documentation says little
// more than its format): err then says what it was, for a note, and
// notice is false.
func (c *ECSClient) SpotTermination(ctx context.Context) (at time.Time, notice bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, spotPollTimeout)
	defer cancel()
	start := c.now()
	b := budget{start: start, end: start.Add(spotPollTimeout), quiet: true}
	raw, err := c.get(ctx, b, metaDataPath+SpotTerminationKey, maxMetaValue)
	if errors.Is(err, ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return ParseSpotTermination(string(raw))
}

// ParseSpotTermination reads the service's answer: an RFC 3339 time
// (2026-12-02T08:00:00Z). Anything else is no notice, with the reason.
func ParseSpotTermination(v string) (time.Time, bool, error) {
	v = strings.TrimSpace(v)
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		return time.Time{}, false, fmt.Errorf("%s answered %q, not a time: taken as no notice", SpotTerminationKey, v)
	}
	return t.UTC(), true, nil
}
