package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-os/drover/agent/provider"
)

// SpotPoll is how often the agent asks the metadata service whether its
// spot instance is to be reclaimed: one GET of a link-local service, with
// the token the agent holds; ECS gives a few minutes' notice.
const SpotPoll = 5 * time.Second

// spotTries bounds the Node updates on a notice: the power-off must not
// wait for an API server that does not answer.
const spotTries = 4

// SpotSource answers whether and when the instance will be reclaimed
// (provider.ECSClient).
type SpotSource interface {
	SpotTermination(ctx context.Context) (at time.Time, notice bool, err error)
}

// WatchSpot polls src every period until a reclaim is announced, then
// acts on it (onSpotNotice) and returns; it returns when ctx ends. An
// answer that is not a notice and not a 404 is noted once.
func (a *Agent) WatchSpot(ctx context.Context, src SpotSource, period time.Duration) {
	noted := false
	for {
		at, notice, err := src.SpotTermination(ctx)
		if err != nil && !noted && ctx.Err() == nil {
			a.rec.Note("spot watch: " + err.Error())
			noted = true
		}
		if notice {
			a.onSpotNotice(ctx, at, period)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// onSpotNotice cordons the Node (the node lifecycle controller then
// taints it unschedulable), records a SpotInterruption Event, and powers
// the node off through logind: the kubelet's graceful node shutdown stops
// the pods first, within shutdownGracePeriod, well inside the notice.
// The Node updates are retried a few times; the power-off does not wait
// for them beyond that.
func (a *Agent) onSpotNotice(ctx context.Context, at time.Time, wait time.Duration) {
	msg := fmt.Sprintf("ECS reclaims this spot instance at %s (metadata %s): node cordoned, shutting down gracefully now (pods stopped by the kubelet's graceful node shutdown)",
		at.Format(time.RFC3339), provider.SpotTerminationKey)
	a.rec.Note("spot: " + msg)
	cordoned, recorded := false, false
	for try := 0; try < spotTries && !(cordoned && recorded) && ctx.Err() == nil; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		api, node, err := a.guardAPI()
		if err != nil {
			a.rec.Note("spot: no API client to cordon the Node: " + err.Error())
			continue
		}
		if !cordoned {
			if err := api.Cordon(ctx, node); err != nil {
				a.rec.Note("spot: cordoning the Node: " + err.Error())
			} else {
				cordoned = true
			}
		}
		if !recorded {
			uid := ""
			if n, err := api.GetNode(ctx, node); err == nil {
				uid = n.Metadata.UID
			}
			if err := api.Event(ctx, node, uid, SpotInterruption, msg); err != nil {
				a.rec.Note("spot: recording the Event: " + err.Error())
			} else {
				recorded = true
			}
		}
	}
	if a.env.PowerOff == nil {
		a.rec.Note("spot: no way to power off here; the instance is reclaimed at " + at.Format(time.RFC3339))
		return
	}
	if err := a.env.PowerOff(ctx); err != nil {
		a.rec.Note("spot: asking logind to power off: " + err.Error() + "; the instance is reclaimed at " + at.Format(time.RFC3339) + " without the pods' graceful stop")
	}
}

// SpotInterruption is the reason of the agent's Event on a reclaim notice.
const SpotInterruption = "SpotInterruption"
