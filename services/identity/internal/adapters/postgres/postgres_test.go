package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	"svc.dev/services/identity/internal/adapters/adaptertest"
	"svc.dev/services/identity/internal/adapters/postgres"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/user"
	"svc.dev/services/identity/migrations"
)

func TestRepositoriesContract(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, func(t *testing.T, c port.Ceilings) port.Repositories {
		return postgres.Repositories(testkit.NewSchema(t, migrations.FS), c)
	})
}

// Racing bootstraps on an empty store: exactly one wins, and a sign-up racing them either
// commits before the winner (and the bootstraps fail) or after.
func TestRegistrarOnlyIfNoUsersIsAtomic(t *testing.T) {
	t.Parallel()
	repos := postgres.Repositories(testkit.NewSchema(t, migrations.FS), port.DefaultCeilings())
	ctx := context.Background()
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for i := range n {
		wg.Go(func() {
			u, err := user.New("root"+string(rune('a'+i))+"@x.io", "", "hash", time.Now())
			require.NoError(t, err)
			o, err := org.NewPersonal("", org.Person{ID: u.ID(), Email: u.Email()}, time.Now())
			require.NoError(t, err)
			err = repos.Registrar.Register(ctx, port.Registration{User: u, Organization: o, OnlyIfNoUsers: true})
			if errors.Is(err, port.ErrUsersExist) {
				return
			}
			require.NoError(t, err)
			mu.Lock()
			wins++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, 1, wins)
}

// Concurrent removals of the last two owners: the row lock serialises them, so one of the
// two owners always stays.
func TestOrganizationUpdateIsSerialized(t *testing.T) {
	t.Parallel()
	repos := postgres.Repositories(testkit.NewSchema(t, migrations.FS), port.DefaultCeilings())
	ctx := context.Background()
	now := time.Now()
	var people []org.Person
	for _, e := range []string{"ann@x.io", "bob@x.io"} {
		u, err := user.New(e, "", "hash", now)
		require.NoError(t, err)
		o, err := org.NewPersonal("", org.Person{ID: u.ID(), Email: u.Email()}, now)
		require.NoError(t, err)
		require.NoError(t, repos.Registrar.Register(ctx, port.Registration{User: u, Organization: o}))
		people = append(people, org.Person{ID: u.ID(), Email: u.Email()})
	}
	team, err := org.New("Team", "team", people[0], now)
	require.NoError(t, err)
	require.NoError(t, repos.Organizations.Add(ctx, team))
	require.NoError(t, repos.Organizations.Update(ctx, team.ID(), func(_ context.Context, o *org.Organization) error {
		inv, err := o.Invite(people[0].ID, people[1].Email, org.Owner, false, now)
		if err != nil {
			return err
		}
		_, _, err = o.Accept(inv.ID, people[1], now)
		return err
	}))

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			errs[i] = repos.Organizations.Update(ctx, team.ID(), func(_ context.Context, o *org.Organization) error {
				_, err := o.Leave(people[i].ID)
				return err
			})
		})
	}
	wg.Wait()
	got, err := repos.Organizations.Get(ctx, team.ID())
	require.NoError(t, err)
	require.Len(t, got.Members(), 1)
	require.True(t, (errs[0] == nil) != (errs[1] == nil), "exactly one leaves: %v", errs)
}
