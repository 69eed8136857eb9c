package service

import (
	"context"

	"svc.dev/services/run-orchestrator/internal/app/command"
)

// StopWorking stops the replica's job workers and wait timers: it executes no run any more,
// while its HTTP surface, its streams and its listener go on (tests: a replica serving the
// streams of runs another replica executes).
func (a *Application) StopWorking(ctx context.Context) error {
	a.engine.timers.Stop()
	return a.engine.queue.Stop(ctx)
}

// StopListening ends the replica's listener (and its notifier, which has nothing to send on a
// replica that executes nothing): its streams hear of no commit and learn of changes only by
// reading again.
func (a *Application) StopListening() {
	a.engine.bgCancel()
	a.engine.bgDone.Wait()
}

// NotifiesOthers says whether the replica's commits are being notified to other replicas
// (another live replica reported streams open at this replica's last heartbeat).
func (a *Application) NotifiesOthers() bool { return a.engine.notifier.Notifying() }

// SweepRetention runs one retention sweep now, as the replica's background loop does.
func (a *Application) SweepRetention(ctx context.Context) (command.SweepResult, error) {
	return a.sweeper.sweep.Handle(ctx)
}
