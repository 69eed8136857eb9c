// Package memory is an in-memory implementation of every identity store. App-layer tests run
// on it; the shared contract suite (adaptertest) holds it to the same behaviour as the
// Postgres adapter, so a test that passes here means the same against the database.
package memory

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

type userRow struct {
	id, email, name, hash string
	verified              bool
	createdAt, updatedAt  time.Time
}

type sessionRow struct {
	id, userID, activeOrg, ip, ua string
	hash                          []byte
	cleared                       bool
	expiresAt, createdAt, updated time.Time
}

type memberRow struct {
	id, orgID, userID string
	role              org.Role
	createdAt         time.Time
}

type keyRow struct {
	id, name, start, hash, orgID, createdBy    string
	enabled                                    bool
	expiresAt, lastRequest, createdAt, updated time.Time
}

type resetRow struct {
	userID    string
	expiresAt time.Time
}

// Store holds every table. Its repositories share it, and one mutex makes each call atomic.
type Store struct {
	mu          sync.Mutex
	users       map[string]userRow
	sessions    map[string]sessionRow
	orgs        map[string]org.Profile
	members     map[string]memberRow
	invitations map[string]org.Invitation
	keys        map[string]keyRow
	resets      map[string]resetRow
	ceilings    port.Ceilings
}

// NewStore returns an empty store that keeps c, as the Postgres adapter does.
func NewStore(c port.Ceilings) *Store {
	c.Validate()
	return &Store{ceilings: c, users: map[string]userRow{}, sessions: map[string]sessionRow{}, orgs: map[string]org.Profile{},
		members: map[string]memberRow{}, invitations: map[string]org.Invitation{}, keys: map[string]keyRow{}, resets: map[string]resetRow{}}
}

// Repositories returns the store's repositories.
func (s *Store) Repositories() port.Repositories {
	return port.Repositories{Users: UserRepository{s}, Sessions: SessionRepository{s}, Organizations: OrganizationRepository{s},
		Keys: KeyRepository{s}, ResetTokens: ResetTokenRepository{s}, Registrar: Registrar{s}}
}

func (r userRow) entity() *user.User {
	return user.UnmarshalFromDatabase(r.id, r.email, r.name, r.verified, r.hash, r.createdAt, r.updatedAt)
}

func (s *Store) userByEmail(email string) (userRow, bool) {
	for _, u := range s.users {
		if strings.EqualFold(u.email, email) {
			return u, true
		}
	}
	return userRow{}, false
}

// UserRepository implements user.Repository.
type UserRepository struct{ s *Store }

// Get implements user.Repository.
func (r UserRepository) Get(_ context.Context, id string) (*user.User, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	u, ok := r.s.users[id]
	if !ok {
		return nil, user.ErrNotFound
	}
	return u.entity(), nil
}

// ByEmail implements user.Repository.
func (r UserRepository) ByEmail(_ context.Context, email string) (*user.User, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	u, ok := r.s.userByEmail(email)
	if !ok {
		return nil, user.ErrNotFound
	}
	return u.entity(), nil
}

// Update implements user.Repository.
func (r UserRepository) Update(ctx context.Context, id string, updateFunc func(context.Context, *user.User) error) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.updateUser(ctx, id, updateFunc)
}

// updateUser is Update with s.mu held.
func (s *Store) updateUser(ctx context.Context, id string, updateFunc func(context.Context, *user.User) error) error {
	row, ok := s.users[id]
	if !ok {
		return user.ErrNotFound
	}
	u := row.entity()
	if err := updateFunc(ctx, u); err != nil {
		return err
	}
	row.hash, row.updatedAt = u.PasswordHash(), u.UpdatedAt()
	s.users[id] = row
	if u.RevokesSessions() {
		for sid, ss := range s.sessions {
			if ss.userID == id {
				delete(s.sessions, sid)
			}
		}
	}
	if u.PasswordChanged() {
		for h, t := range s.resets {
			if t.userID == id {
				delete(s.resets, h)
			}
		}
	}
	return nil
}

func toSessionRow(x *session.Session) sessionRow {
	return sessionRow{id: x.ID(), userID: x.UserID(), activeOrg: x.ActiveOrganizationID(), ip: x.IPAddress(), ua: x.UserAgent(),
		hash: append([]byte(nil), x.TokenHash()...), cleared: x.ActiveCleared(), expiresAt: x.ExpiresAt(), createdAt: x.CreatedAt(), updated: x.UpdatedAt()}
}

func (r sessionRow) entity() *session.Session {
	return session.UnmarshalFromDatabase(r.id, append([]byte(nil), r.hash...), r.userID, r.activeOrg, r.cleared, r.expiresAt, r.ip, r.ua, r.createdAt, r.updated)
}

// SessionRepository implements port.Sessions.
type SessionRepository struct{ s *Store }

// Add implements session.Repository.
func (r SessionRepository) Add(_ context.Context, x *session.Session) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.sessions[x.ID()] = toSessionRow(x)
	return nil
}

// Authenticate implements port.Sessions.
func (r SessionRepository) Authenticate(_ context.Context, tokenHash []byte) (port.SessionRecord, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for _, row := range r.s.sessions {
		if !bytes.Equal(row.hash, tokenHash) {
			continue
		}
		u, ok := r.s.users[row.userID]
		if !ok {
			return port.SessionRecord{}, session.ErrNotFound
		}
		rec := port.SessionRecord{Session: row.entity(), User: u.entity()}
		for _, m := range r.s.members {
			if m.orgID == row.activeOrg && m.userID == row.userID {
				rec.Role = m.role
			}
		}
		return rec, nil
	}
	return port.SessionRecord{}, session.ErrNotFound
}

// Update implements session.Repository.
func (r SessionRepository) Update(ctx context.Context, id string, updateFunc func(context.Context, *session.Session) error) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	row, ok := r.s.sessions[id]
	if !ok {
		return session.ErrNotFound
	}
	x := row.entity()
	if err := updateFunc(ctx, x); err != nil {
		return err
	}
	r.s.sessions[id] = toSessionRow(x)
	return nil
}

// Extend implements session.Repository.
func (r SessionRepository) Extend(_ context.Context, id string, expiresAt time.Time) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	row, ok := r.s.sessions[id]
	if ok && row.expiresAt.Before(expiresAt) {
		row.expiresAt, row.updated = expiresAt, expiresAt.Add(-session.Lifetime)
		r.s.sessions[id] = row
	}
	return nil
}

// Delete implements session.Repository.
func (r SessionRepository) Delete(_ context.Context, id string) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	delete(r.s.sessions, id)
	return nil
}

// OrganizationRepository implements org.Repository.
type OrganizationRepository struct{ s *Store }

func (s *Store) addOrganization(o *org.Organization) error {
	p := o.Profile()
	for _, other := range s.orgs {
		if other.Slug == p.Slug {
			return org.ErrSlugTaken
		}
	}
	s.orgs[p.ID] = p
	for _, m := range o.Members() {
		s.members[m.ID] = memberRow{id: m.ID, orgID: p.ID, userID: m.User.ID, role: m.Role, createdAt: m.CreatedAt}
	}
	for _, inv := range o.Invitations() {
		s.invitations[inv.ID] = inv
	}
	return nil
}

func (s *Store) loadOrganization(id string) (*org.Organization, bool) {
	p, ok := s.orgs[id]
	if !ok {
		return nil, false
	}
	var members []org.Membership
	for _, m := range s.members {
		if m.orgID == id {
			u := s.users[m.userID]
			members = append(members, org.Membership{ID: m.id, OrganizationID: id, Role: m.role, CreatedAt: m.createdAt,
				User: org.Person{ID: u.id, Email: u.email, Name: u.name}})
		}
	}
	var invs []org.Invitation
	for _, inv := range s.invitations {
		if inv.OrganizationID == id && inv.Status == org.Pending {
			invs = append(invs, inv)
		}
	}
	sort.Slice(invs, func(i, j int) bool { return invs[i].ID < invs[j].ID })
	return org.UnmarshalFromDatabase(p, members, invs), true
}

// admit is the ceiling on userID's memberships.
func (s *Store) admit(userID string) error {
	if len(s.membershipsOf(userID)) >= s.ceilings.OrganizationsPerUser {
		return org.ErrTooManyOrganizations
	}
	return nil
}

// Add implements org.Repository.
func (r OrganizationRepository) Add(_ context.Context, o *org.Organization) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for _, m := range o.Members() {
		if err := r.s.admit(m.User.ID); err != nil {
			return err
		}
	}
	return r.s.addOrganization(o)
}

// Get implements org.Repository.
func (r OrganizationRepository) Get(_ context.Context, id string) (*org.Organization, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	o, ok := r.s.loadOrganization(id)
	if !ok {
		return nil, org.ErrNotFound
	}
	return o, nil
}

// BySlug implements org.Repository.
func (r OrganizationRepository) BySlug(_ context.Context, slug string) (*org.Organization, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for id, p := range r.s.orgs {
		if p.Slug == slug {
			o, _ := r.s.loadOrganization(id)
			return o, nil
		}
	}
	return nil, org.ErrNotFound
}

func (s *Store) membershipsOf(userID string) []memberRow {
	var ms []memberRow
	for _, m := range s.members {
		if m.userID == userID {
			ms = append(ms, m)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
}

// ListForUser implements org.Repository.
func (r OrganizationRepository) ListForUser(_ context.Context, userID string) ([]org.Profile, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	out := []org.Profile{}
	for _, m := range r.s.membershipsOf(userID) {
		out = append(out, r.s.orgs[m.orgID])
	}
	return out, nil
}

// OnlyMembership implements org.Repository.
func (r OrganizationRepository) OnlyMembership(_ context.Context, userID string) (org.Membership, bool, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	ms := r.s.membershipsOf(userID)
	if len(ms) != 1 {
		return org.Membership{}, false, nil
	}
	m := ms[0]
	return org.Membership{ID: m.id, OrganizationID: m.orgID, User: org.Person{ID: userID}, Role: m.role, CreatedAt: m.createdAt}, true, nil
}

// InvitationOrganization implements org.Repository.
func (r OrganizationRepository) InvitationOrganization(_ context.Context, invitationID string) (string, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	inv, ok := r.s.invitations[invitationID]
	if !ok {
		return "", org.ErrInvitationNotFound
	}
	return inv.OrganizationID, nil
}

// Update implements org.Repository.
func (r OrganizationRepository) Update(ctx context.Context, id string, updateFunc func(context.Context, *org.Organization) error) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	o, ok := r.s.loadOrganization(id)
	if !ok {
		return org.ErrNotFound
	}
	if err := updateFunc(ctx, o); err != nil {
		return err
	}
	// Checked before anything is written: the Postgres adapter's transaction is all or nothing.
	for _, m := range o.Members() {
		if _, ok := r.s.members[m.ID]; !ok {
			if err := r.s.admit(m.User.ID); err != nil {
				return err
			}
		}
	}
	after := map[string]bool{}
	for _, m := range o.Members() {
		after[m.ID] = true
		if _, ok := r.s.members[m.ID]; !ok {
			r.s.members[m.ID] = memberRow{id: m.ID, orgID: id, userID: m.User.ID, role: m.Role, createdAt: m.CreatedAt}
		}
	}
	for mid, m := range r.s.members {
		if m.orgID == id && !after[mid] {
			delete(r.s.members, mid)
		}
	}
	for _, inv := range o.Invitations() {
		r.s.invitations[inv.ID] = inv
	}
	return nil
}

func toKeyRow(k *apikey.APIKey) keyRow {
	return keyRow{id: k.ID(), name: k.Name(), start: k.Start(), hash: k.Hash(), orgID: k.OrganizationID(), createdBy: k.CreatedBy(),
		enabled: k.Enabled(), expiresAt: k.ExpiresAt(), lastRequest: k.LastRequest(), createdAt: k.CreatedAt(), updated: k.UpdatedAt()}
}

func (r keyRow) entity() *apikey.APIKey {
	return apikey.UnmarshalFromDatabase(r.id, r.name, r.start, r.hash, r.orgID, r.createdBy, r.enabled, r.expiresAt, r.lastRequest, r.createdAt, r.updated)
}

// KeyRepository implements port.Keys.
type KeyRepository struct{ s *Store }

// Add implements apikey.Repository, within the organization's and the creator's ceilings.
func (r KeyRepository) Add(_ context.Context, k *apikey.APIKey) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	ofOrg, ofUser := 0, 0
	for _, row := range r.s.keys {
		if row.orgID == k.OrganizationID() {
			ofOrg++
		}
		if k.CreatedBy() != "" && row.createdBy == k.CreatedBy() {
			ofUser++
		}
	}
	if ofOrg >= r.s.ceilings.KeysPerOrganization {
		return apikey.ErrTooManyKeys
	}
	if ofUser >= r.s.ceilings.KeysPerUser {
		return apikey.ErrTooManyKeysOfUser
	}
	r.s.keys[k.ID()] = toKeyRow(k)
	return nil
}

// Get implements apikey.Repository.
func (r KeyRepository) Get(_ context.Context, id string) (*apikey.APIKey, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	k, ok := r.s.keys[id]
	if !ok {
		return nil, apikey.ErrNotFound
	}
	return k.entity(), nil
}

func (s *Store) keyByHash(hash string) (keyRow, bool) {
	for _, k := range s.keys {
		if k.hash == hash {
			return k, true
		}
	}
	return keyRow{}, false
}

// ByHash implements apikey.Repository.
func (r KeyRepository) ByHash(_ context.Context, hash string) (*apikey.APIKey, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	k, ok := r.s.keyByHash(hash)
	if !ok {
		return nil, apikey.ErrNotFound
	}
	return k.entity(), nil
}

// Authenticate implements port.Keys.
func (r KeyRepository) Authenticate(_ context.Context, hash string) (port.KeyRecord, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	k, ok := r.s.keyByHash(hash)
	if !ok {
		return port.KeyRecord{}, apikey.ErrNotFound
	}
	rec := port.KeyRecord{Key: k.entity()}
	if u, ok := r.s.users[k.createdBy]; ok {
		rec.Creator = org.Person{ID: u.id, Email: u.email, Name: u.name}
	}
	return rec, nil
}

// ListByOrganization implements apikey.Repository.
func (r KeyRepository) ListByOrganization(_ context.Context, organizationID string) ([]*apikey.APIKey, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	var rows []keyRow
	for _, k := range r.s.keys {
		if k.orgID == organizationID {
			rows = append(rows, k)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].id < rows[j].id })
	out := make([]*apikey.APIKey, 0, len(rows))
	for _, k := range rows {
		out = append(out, k.entity())
	}
	return out, nil
}

// Delete implements apikey.Repository.
func (r KeyRepository) Delete(_ context.Context, id string) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if _, ok := r.s.keys[id]; !ok {
		return apikey.ErrNotFound
	}
	delete(r.s.keys, id)
	return nil
}

// Touch implements apikey.Repository.
func (r KeyRepository) Touch(_ context.Context, uses map[string]time.Time) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for id, at := range uses {
		if k, ok := r.s.keys[id]; ok && k.lastRequest.Before(at) {
			k.lastRequest = at.UTC().Truncate(time.Microsecond)
			r.s.keys[id] = k
		}
	}
	return nil
}

// ResetTokenRepository implements port.ResetTokens.
type ResetTokenRepository struct{ s *Store }

// Add implements port.ResetTokens.
func (r ResetTokenRepository) Add(_ context.Context, userID, hash string, expiresAt time.Time) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.resets[hash] = resetRow{userID: userID, expiresAt: expiresAt}
	return nil
}

// Lookup implements port.ResetTokens.
func (r ResetTokenRepository) Lookup(_ context.Context, hash string, now time.Time) (string, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	t, ok := r.s.resets[hash]
	if !ok || !now.Before(t.expiresAt) {
		return "", port.ErrResetTokenNotFound
	}
	return t.userID, nil
}

// Redeem implements port.ResetTokens: the one mutex makes it all or nothing.
func (r ResetTokenRepository) Redeem(ctx context.Context, hash string, now time.Time, updateFunc func(context.Context, *user.User) error) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	t, ok := r.s.resets[hash]
	if !ok {
		return port.ErrResetTokenNotFound
	}
	if !now.Before(t.expiresAt) {
		delete(r.s.resets, hash)
		return port.ErrResetTokenNotFound
	}
	if err := r.s.updateUser(ctx, t.userID, updateFunc); err != nil {
		return err
	}
	delete(r.s.resets, hash)
	return nil
}

// Registrar implements port.Registrar.
type Registrar struct{ s *Store }

// AnyUsers implements port.Registrar.
func (r Registrar) AnyUsers(context.Context) (bool, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return len(r.s.users) > 0, nil
}

// Register implements port.Registrar: all or nothing.
func (r Registrar) Register(_ context.Context, reg port.Registration) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if reg.OnlyIfNoUsers && len(r.s.users) > 0 {
		return port.ErrUsersExist
	}
	u := reg.User
	if _, taken := r.s.userByEmail(u.Email()); taken {
		return user.ErrEmailTaken
	}
	for _, p := range r.s.orgs {
		if p.Slug == reg.Organization.Profile().Slug {
			return org.ErrSlugTaken
		}
	}
	r.s.users[u.ID()] = userRow{id: u.ID(), email: u.Email(), name: u.Name(), hash: u.PasswordHash(), verified: u.EmailVerified(),
		createdAt: u.CreatedAt(), updatedAt: u.UpdatedAt()}
	if err := r.s.addOrganization(reg.Organization); err != nil {
		return err
	}
	if reg.Session != nil {
		r.s.sessions[reg.Session.ID()] = toSessionRow(reg.Session)
	}
	if reg.APIKey != nil {
		r.s.keys[reg.APIKey.ID()] = toKeyRow(reg.APIKey)
	}
	return nil
}
