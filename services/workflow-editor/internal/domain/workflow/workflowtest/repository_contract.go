// Package workflowtest is the contract every workflow.Repository keeps: the
// Postgres adapter and the in-memory fake of the app tests run the same suite.
package workflowtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
	"svc.dev/proto/connectors"
	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// RunRepositoryContract runs the contract against repositories made by newRepo, one per
// subtest.
func RunRepositoryContract(t *testing.T, newRepo func(t *testing.T) workflow.Repository) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 2, 6, 44, 537_000_000, time.UTC)

	mk := func(t *testing.T, org, name string, at time.Time) *workflow.Workflow {
		t.Helper()
		w, err := workflow.New(wire.NewID(wire.Workflow), org, name, "about "+name, at)
		require.NoError(t, err)
		return w
	}
	sampleDef := workflow.Definition{
		Blocks: []workflow.Block{
			{ID: "start", Type: "trigger.manual", Params: map[string]any{}},
			{ID: "say", Type: "log", Params: map[string]any{"message": "hi {{ input.name }}", "n": json.Number("1.50")}},
		},
		Edges: []workflow.Edge{{From: "start", To: "say"}},
	}
	bump := func(def workflow.Definition) func(ctx context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
		return func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
			return workflow.UnmarshalFromDatabase(w.ID(), w.OrganizationID(), w.Name(), w.Description(), w.Version()+1,
				def, w.CreatedAt(), w.UpdatedAt().Add(time.Second)), nil
		}
	}

	t.Run("AddThenGet", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		w := mk(t, "org_a", "one", t0)
		require.NoError(t, repo.Add(ctx, w))
		got, err := repo.Get(ctx, "org_a", w.ID())
		require.NoError(t, err)
		require.Equal(t, w.ID(), got.ID())
		require.Equal(t, "org_a", got.OrganizationID())
		require.Equal(t, "one", got.Name())
		require.Equal(t, "about one", got.Description())
		require.Equal(t, int64(1), got.Version())
		require.True(t, w.CreatedAt().Equal(got.CreatedAt()), "%s != %s", w.CreatedAt(), got.CreatedAt())
		require.True(t, w.UpdatedAt().Equal(got.UpdatedAt()))
		require.Empty(t, got.Definition().Blocks)

		byName, err := repo.GetByName(ctx, "org_a", "one")
		require.NoError(t, err)
		require.Equal(t, w.ID(), byName.ID())
	})

	t.Run("OtherOrganizationIsNotFound", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		w := mk(t, "org_a", "mine", t0)
		require.NoError(t, repo.Add(ctx, w))
		_, err := repo.Get(ctx, "org_b", w.ID())
		require.ErrorIs(t, err, workflow.ErrNotFound)
		_, err = repo.GetByName(ctx, "org_b", "mine")
		require.ErrorIs(t, err, workflow.ErrNotFound)
		err = repo.Update(ctx, "org_b", w.ID(), bump(sampleDef))
		require.ErrorIs(t, err, workflow.ErrNotFound)
		require.ErrorIs(t, repo.Delete(ctx, "org_b", w.ID()), workflow.ErrNotFound)
		_, err = repo.Get(ctx, "org_a", w.ID())
		require.NoError(t, err, "still there for its owner")
	})

	t.Run("MissingIsNotFound", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		id := wire.NewID(wire.Workflow)
		_, err := repo.Get(ctx, "org_a", id)
		require.ErrorIs(t, err, workflow.ErrNotFound)
		require.ErrorIs(t, repo.Update(ctx, "org_a", id, bump(sampleDef)), workflow.ErrNotFound)
		require.ErrorIs(t, repo.Delete(ctx, "org_a", id), workflow.ErrNotFound)
	})

	t.Run("NameIsUniquePerOrganization", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		require.NoError(t, repo.Add(ctx, mk(t, "org_a", "same", t0)))
		require.ErrorIs(t, repo.Add(ctx, mk(t, "org_a", "same", t0)), workflow.ErrNameTaken)
		require.NoError(t, repo.Add(ctx, mk(t, "org_b", "same", t0)), "another organization may use it")

		other := mk(t, "org_a", "other", t0)
		require.NoError(t, repo.Add(ctx, other))
		err := repo.Update(ctx, "org_a", other.ID(), func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
			name := "same"
			return w, w.Describe(&name, nil, t0.Add(time.Minute))
		})
		require.ErrorIs(t, err, workflow.ErrNameTaken)
		got, err := repo.Get(ctx, "org_a", other.ID())
		require.NoError(t, err)
		require.Equal(t, "other", got.Name())
		require.Equal(t, int64(1), got.Version())
	})

	t.Run("UpdateStoresANewVersion", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		w := mk(t, "org_a", "edit", t0)
		require.NoError(t, repo.Add(ctx, w))
		require.NoError(t, repo.Update(ctx, "org_a", w.ID(), bump(sampleDef)))
		got, err := repo.Get(ctx, "org_a", w.ID())
		require.NoError(t, err)
		require.Equal(t, int64(2), got.Version())
		require.True(t, got.UpdatedAt().Equal(w.UpdatedAt().Add(time.Second)))
		want, err := json.Marshal(sampleDef)
		require.NoError(t, err)
		have, err := json.Marshal(got.Definition())
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(have))
		require.Equal(t, sampleDef.Blocks[1].Params["n"], got.Definition().Blocks[1].Params["n"], "numbers keep their form")
	})

	t.Run("UpdateWithoutNewVersionWritesNothing", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		w := mk(t, "org_a", "same-version", t0)
		require.NoError(t, repo.Add(ctx, w))
		err := repo.Update(ctx, "org_a", w.ID(), func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
			return workflow.UnmarshalFromDatabase(w.ID(), w.OrganizationID(), "renamed", w.Description(), w.Version(),
				sampleDef, w.CreatedAt(), w.UpdatedAt()), nil
		})
		require.NoError(t, err)
		got, err := repo.Get(ctx, "org_a", w.ID())
		require.NoError(t, err)
		require.Equal(t, "same-version", got.Name())
		require.Empty(t, got.Definition().Blocks)
	})

	t.Run("UpdateErrorStoresNothing", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		w := mk(t, "org_a", "fails", t0)
		require.NoError(t, repo.Add(ctx, w))
		boom := errors.New("boom")
		err := repo.Update(ctx, "org_a", w.ID(), func(ctx context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
			if _, err := bump(sampleDef)(ctx, w); err != nil {
				return nil, err
			}
			return nil, boom
		})
		require.ErrorIs(t, err, boom)
		var vm *workflow.VersionMismatchError
		err = repo.Update(ctx, "org_a", w.ID(), func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
			v := int64(7)
			return nil, w.CheckVersion(&v)
		})
		require.ErrorAs(t, err, &vm)
		require.Equal(t, int64(1), vm.Current)
		got, err := repo.Get(ctx, "org_a", w.ID())
		require.NoError(t, err)
		require.Equal(t, int64(1), got.Version())
	})

	t.Run("UpdatesAreSerialized", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		w := mk(t, "org_a", "busy", t0)
		require.NoError(t, repo.Add(ctx, w))
		const n = 20
		var wg sync.WaitGroup
		errc := make(chan error, n)
		for range n {
			wg.Go(func() {
				errc <- repo.Update(ctx, "org_a", w.ID(), func(ctx context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
					// Read-modify-write: lost updates would leave the count short.
					def := w.Definition().Clone()
					def.Blocks = append(def.Blocks, workflow.Block{ID: fmt.Sprintf("b%d", len(def.Blocks)), Type: "log", Params: map[string]any{}})
					return bump(def)(ctx, w)
				})
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			require.NoError(t, err)
		}
		got, err := repo.Get(ctx, "org_a", w.ID())
		require.NoError(t, err)
		require.Equal(t, int64(n+1), got.Version())
		require.Len(t, got.Definition().Blocks, n)
	})

	t.Run("ListNewestFirstByPages", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		var ids []string
		for i := range 5 {
			w := mk(t, "org_a", fmt.Sprintf("w%d", i), t0.Add(time.Duration(i)*time.Millisecond))
			require.NoError(t, repo.Add(ctx, w))
			ids = append([]string{w.ID()}, ids...)
		}
		// Two with the same creation time are ordered by id.
		tieA, tieB := mk(t, "org_a", "tie-a", t0.Add(-time.Second)), mk(t, "org_a", "tie-b", t0.Add(-time.Second))
		require.NoError(t, repo.Add(ctx, tieA))
		require.NoError(t, repo.Add(ctx, tieB))
		ids = append(ids, tieB.ID(), tieA.ID()) // tieB was made later, so its id is greater
		require.NoError(t, repo.Add(ctx, mk(t, "org_b", "foreign", t0.Add(time.Hour))))

		var got []string
		var after *workflow.Position
		for {
			page, err := repo.List(ctx, "org_a", after, 3)
			require.NoError(t, err)
			for _, s := range page {
				got = append(got, s.ID)
				require.NotEmpty(t, s.Name)
				require.Equal(t, int64(1), s.Version)
			}
			if len(page) < 3 {
				break
			}
			last := page[len(page)-1]
			after = &workflow.Position{CreatedAt: last.CreatedAt, ID: last.ID}
		}
		require.Equal(t, ids, got)
	})

	// H2: whatever the applier accepts can be stored, however hostile the input: every
	// definition FuzzApply's corpus builds is added, then patched, then read back.
	t.Run("StoresWhatApplyAccepts", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		cat, err := catalog.New(connectors.MustLoad())
		require.NoError(t, err)
		for i, data := range ApplyCorpus(t) {
			half := len(data) / 2
			w, _, err := workflow.NewWithDefinition(wire.NewID(wire.Workflow), "org_a", fmt.Sprintf("corpus-%d", i), "", cat, OpsFromBytes(data[:half]), t0)
			require.NoError(t, err)
			require.NoError(t, repo.Add(ctx, w), "corpus entry %d: add", i)
			var want []byte
			err = repo.Update(ctx, "org_a", w.ID(), func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
				w.Edit(cat, OpsFromBytes(data[half:]), t0.Add(time.Second))
				want, err = json.Marshal(w.Definition())
				return w, err
			})
			require.NoError(t, err, "corpus entry %d: update", i)
			got, err := repo.Get(ctx, "org_a", w.ID())
			require.NoError(t, err)
			have, err := json.Marshal(got.Definition())
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(have), "corpus entry %d", i)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		repo := newRepo(t)
		w := mk(t, "org_a", "gone", t0)
		require.NoError(t, repo.Add(ctx, w))
		require.NoError(t, repo.Delete(ctx, "org_a", w.ID()))
		_, err := repo.Get(ctx, "org_a", w.ID())
		require.ErrorIs(t, err, workflow.ErrNotFound)
		require.ErrorIs(t, repo.Delete(ctx, "org_a", w.ID()), workflow.ErrNotFound)
		require.NoError(t, repo.Add(ctx, mk(t, "org_a", "gone", t0)), "the name is free again")
	})
}
