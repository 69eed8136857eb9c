package fairshare_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/fairshare"
)

// job is a queued job of the model queue: served in tag order, then in the order queued (River
// orders by scheduled_at, then id).
type job struct {
	org string
	tag time.Time
	seq int
}

// queue is a model of River's fetch order over tagged jobs.
type queue struct {
	clock *fairshare.Clock
	jobs  []job
	seq   int
	now   time.Time
}

func (q *queue) add(org string, n int) {
	for _, tag := range q.clock.Tags(org, n, q.now) {
		q.seq++
		q.jobs = append(q.jobs, job{org: org, tag: tag, seq: q.seq})
	}
}

// tx tags n jobs of org in a transaction that commits later (commit): until then no worker
// sees them, and neither does a read of the head.
func (q *queue) tx(org string, n int) (commit func()) {
	var jobs []job
	for _, tag := range q.clock.Tags(org, n, q.now) {
		q.seq++
		jobs = append(jobs, job{org: org, tag: tag, seq: q.seq})
	}
	return func() { q.jobs = append(q.jobs, jobs...) }
}

// take serves the next job, as a worker taking it from the head of the queue.
func (q *queue) take() job {
	sort.SliceStable(q.jobs, func(i, j int) bool {
		if !q.jobs[i].tag.Equal(q.jobs[j].tag) {
			return q.jobs[i].tag.Before(q.jobs[j].tag)
		}
		return q.jobs[i].seq < q.jobs[j].seq
	})
	j := q.jobs[0]
	q.jobs = q.jobs[1:]
	q.clock.Took(j.tag)
	if len(q.jobs) > 0 {
		q.clock.Head(q.jobs[0].tag) // a worker's read of the head, as between two steps
	}
	return j
}

func TestClock(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) *queue {
		t.Helper()
		return &queue{clock: fairshare.NewClock(0, 0), now: time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)}
	}

	t.Run("QuietOrganizationGoesNextBehindABacklog", func(t *testing.T) {
		t.Parallel()
		q := setup(t)
		q.add("busy", 2400)
		for range 100 {
			q.take()
			q.now = q.now.Add(3 * time.Millisecond)
		}
		q.add("quiet", 1)
		require.Equal(t, "quiet", q.take().org, "the quiet organization's job is served before the rest of the backlog")
	})

	t.Run("QuietOrganizationGoesBeforeJobsCommittedLate", func(t *testing.T) {
		t.Parallel()
		q := setup(t)
		q.add("busy", 10)
		q.take()
		// A burst: forty transactions of sixty jobs each, tagged in order, the first three
		// committing after the rest and after a worker read the head.
		var late []func()
		for i := range 40 {
			commit := q.tx("busy", 60)
			if i < 3 {
				late = append(late, commit)
			} else {
				commit()
			}
		}
		for range 12 {
			q.take() // the head now shows the fourth transaction's jobs
			q.now = q.now.Add(time.Millisecond)
		}
		q.add("quiet", 1)
		for _, commit := range late {
			commit()
		}
		require.Equal(t, "quiet", q.take().org, "the quiet organization's job goes before the jobs tagged earlier that committed late")
	})

	t.Run("QuietOrganizationStaysQuietWhenTheHeadStepsBack", func(t *testing.T) {
		t.Parallel()
		q := setup(t)
		q.add("busy", 100)
		late := q.tx("busy", 60)
		q.add("busy", 100)
		for range 150 {
			q.take() // past the late transaction's place: the head stands in the last 100
			q.now = q.now.Add(20 * time.Millisecond)
		}
		q.add("quiet", 1)
		require.Equal(t, "quiet", q.take().org)
		late() // the late jobs commit: the head steps back to them
		q.take()
		q.add("quiet", 1)
		require.Equal(t, "quiet", q.take().org, "a quiet organization's last tag, after the head that stepped back, is no queued work")
	})

	t.Run("BusyOrganizationsTakeTurns", func(t *testing.T) {
		t.Parallel()
		q := setup(t)
		q.add("a", 1000)
		q.take()
		q.add("b", 1000)
		served := map[string]int{}
		for range 200 {
			served[q.take().org]++
		}
		require.InDelta(t, 100, served["a"], 1)
		require.InDelta(t, 100, served["b"], 1)
	})

	t.Run("AloneItKeepsItsOrder", func(t *testing.T) {
		t.Parallel()
		q := setup(t)
		for i := range 50 {
			q.add("only", i%3+1)
		}
		var seqs []int
		for len(q.jobs) > 0 {
			seqs = append(seqs, q.take().seq)
		}
		require.True(t, slices.IsSorted(seqs), "one organization's jobs are served in the order queued")
	})

	t.Run("TagsNeverInTheFuture", func(t *testing.T) {
		t.Parallel()
		c := fairshare.NewClock(time.Second, time.Minute)
		now := time.Now()
		tags := c.Tags("flood", 500, now)
		for _, tag := range tags {
			require.False(t, tag.After(now))
		}
		require.True(t, slices.IsSortedFunc(tags, func(a, b time.Time) int { return a.Compare(b) }))
		require.Equal(t, now, tags[len(tags)-1], "a queue longer than the band is pinned at now")
	})

	t.Run("IdleOrganizationsAreForgotten", func(t *testing.T) {
		t.Parallel()
		q := setup(t)
		for i := range 5000 {
			q.add(fmt.Sprintf("org%d", i), 1)
			q.take()
		}
		// Each organization's job was taken: the swept map holds none of them, and a new job of
		// any of them is served next.
		q.add("busy", 100)
		q.add("org7", 1)
		require.Equal(t, "busy", q.take().org)
		require.Equal(t, "org7", q.take().org)
	})
}
