package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/libs/pgdb"
	"svc.dev/services/identity/internal/domain/org"
)

const (
	insertOrganization = `INSERT INTO organizations (id, name, slug, created_at) VALUES ($1, $2, $3, $4)`
	insertMember       = `INSERT INTO members (id, organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4, $5)`
	deleteMembers      = `DELETE FROM members WHERE organization_id = $1 AND id = ANY($2)`
	selectOrganization = `SELECT id, name, slug, created_at FROM organizations WHERE id = $1`
	lockOrganization   = selectOrganization + ` FOR UPDATE`
	selectOrgIDBySlug  = `SELECT id FROM organizations WHERE slug = $1`
	selectOrgMembers   = `SELECT m.id, m.role, m.created_at, u.id, u.email, u.name
		FROM members m JOIN users u ON u.id = m.user_id WHERE m.organization_id = $1 ORDER BY m.id`
	selectOrgInvitations = `SELECT id, email, role, status, inviter_id, expires_at, created_at
		FROM invitations WHERE organization_id = $1 AND status = 'pending' ORDER BY id`
	upsertInvitation = `INSERT INTO invitations (id, organization_id, email, role, status, inviter_id, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET role = EXCLUDED.role, status = EXCLUDED.status, expires_at = EXCLUDED.expires_at`
	selectOrganizationsOfUser = `SELECT o.id, o.name, o.slug, o.created_at
		FROM members m JOIN organizations o ON o.id = m.organization_id WHERE m.user_id = $1 ORDER BY m.id`
	selectMembershipsOfUser = `SELECT id, organization_id, role, created_at FROM members WHERE user_id = $1 ORDER BY id LIMIT 2`
	selectInvitationOrg     = `SELECT organization_id FROM invitations WHERE id = $1`
	organizationsSlugKey    = "organizations_slug_key"
	membersOrgUserKey       = "members_organization_id_user_id_key"
)

// OrganizationRepository implements org.Repository. It keeps every user within
// maxPerUser memberships (port.Ceilings.OrganizationsPerUser).
type OrganizationRepository struct {
	pool       *pgxpool.Pool
	maxPerUser int
}

// NewOrganizationRepository returns the repository; a membership past maxPerUser (at least
// 1) is org.ErrTooManyOrganizations.
func NewOrganizationRepository(pool *pgxpool.Pool, maxPerUser int) *OrganizationRepository {
	if maxPerUser < 1 {
		panic("organizations per user must be at least 1")
	}
	return &OrganizationRepository{pool: pool, maxPerUser: maxPerUser}
}

// admit checks, under a lock on the user's row held until tx ends, that userID may join one
// more organization.
func (r *OrganizationRepository) admit(ctx context.Context, tx pgx.Tx, userID string) error {
	ok, err := hasRoom(ctx, tx, lockUserRow, countMemberships, userID, r.maxPerUser)
	if err != nil {
		return err
	}
	if !ok {
		return org.ErrTooManyOrganizations
	}
	return nil
}

func addOrganization(ctx context.Context, q querier, o *org.Organization) error {
	p := o.Profile()
	if _, err := q.Exec(ctx, insertOrganization, p.ID, p.Name, p.Slug, p.CreatedAt); err != nil {
		if uniqueViolation(err, organizationsSlugKey) {
			return org.ErrSlugTaken
		}
		return fmt.Errorf("insert organization: %w", err)
	}
	for _, m := range o.Members() {
		if err := addMember(ctx, q, m); err != nil {
			return err
		}
	}
	for _, inv := range o.Invitations() {
		if err := saveInvitation(ctx, q, inv); err != nil {
			return err
		}
	}
	return nil
}

func addMember(ctx context.Context, q querier, m org.Membership) error {
	if _, err := q.Exec(ctx, insertMember, m.ID, m.OrganizationID, m.User.ID, string(m.Role), m.CreatedAt); err != nil {
		if uniqueViolation(err, membersOrgUserKey) {
			return org.ErrAlreadyMember
		}
		return fmt.Errorf("insert member: %w", err)
	}
	return nil
}

func saveInvitation(ctx context.Context, q querier, inv org.Invitation) error {
	_, err := q.Exec(ctx, upsertInvitation, inv.ID, inv.OrganizationID, inv.Email, string(inv.Role), string(inv.Status),
		inv.InviterID, inv.ExpiresAt, inv.CreatedAt)
	if err != nil {
		return fmt.Errorf("save invitation: %w", err)
	}
	return nil
}

// Add implements org.Repository: each first member must have room under the ceiling.
func (r *OrganizationRepository) Add(ctx context.Context, o *org.Organization) error {
	return pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		for _, m := range o.Members() {
			if err := r.admit(ctx, tx, m.User.ID); err != nil {
				return err
			}
		}
		return addOrganization(ctx, tx, o)
	})
}

// load reads the aggregate with query (selectOrganization, or lockOrganization in a
// transaction).
func load(ctx context.Context, q querier, query, id string) (*org.Organization, error) {
	var p org.Profile
	if err := q.QueryRow(ctx, query, id).Scan(&p.ID, &p.Name, &p.Slug, &p.CreatedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, org.ErrNotFound
		}
		return nil, fmt.Errorf("get organization %s: %w", id, err)
	}
	rows, err := q.Query(ctx, selectOrgMembers, id)
	if err != nil {
		return nil, fmt.Errorf("get members: %w", err)
	}
	members, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (org.Membership, error) {
		m := org.Membership{OrganizationID: id}
		var role string
		err := row.Scan(&m.ID, &role, &m.CreatedAt, &m.User.ID, &m.User.Email, &m.User.Name)
		m.Role, m.CreatedAt = org.Role(role), m.CreatedAt.UTC()
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("get members: %w", err)
	}
	rows, err = q.Query(ctx, selectOrgInvitations, id)
	if err != nil {
		return nil, fmt.Errorf("get invitations: %w", err)
	}
	invs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (org.Invitation, error) {
		inv := org.Invitation{OrganizationID: id}
		var role, status string
		err := row.Scan(&inv.ID, &inv.Email, &role, &status, &inv.InviterID, &inv.ExpiresAt, &inv.CreatedAt)
		inv.Role, inv.Status = org.Role(role), org.InvitationStatus(status)
		inv.ExpiresAt, inv.CreatedAt = inv.ExpiresAt.UTC(), inv.CreatedAt.UTC()
		return inv, err
	})
	if err != nil {
		return nil, fmt.Errorf("get invitations: %w", err)
	}
	return org.UnmarshalFromDatabase(p, members, invs), nil
}

// Get implements org.Repository.
func (r *OrganizationRepository) Get(ctx context.Context, id string) (*org.Organization, error) {
	return load(ctx, r.pool, selectOrganization, id)
}

// BySlug implements org.Repository.
func (r *OrganizationRepository) BySlug(ctx context.Context, slug string) (*org.Organization, error) {
	var id string
	if err := r.pool.QueryRow(ctx, selectOrgIDBySlug, slug).Scan(&id); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, org.ErrNotFound
		}
		return nil, fmt.Errorf("get organization by slug: %w", err)
	}
	return load(ctx, r.pool, selectOrganization, id)
}

// ListForUser implements org.Repository.
func (r *OrganizationRepository) ListForUser(ctx context.Context, userID string) ([]org.Profile, error) {
	rows, err := r.pool.Query(ctx, selectOrganizationsOfUser, userID)
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (org.Profile, error) {
		var p org.Profile
		err := row.Scan(&p.ID, &p.Name, &p.Slug, &p.CreatedAt)
		p.CreatedAt = p.CreatedAt.UTC()
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	if out == nil {
		out = []org.Profile{}
	}
	return out, nil
}

// OnlyMembership implements org.Repository.
func (r *OrganizationRepository) OnlyMembership(ctx context.Context, userID string) (org.Membership, bool, error) {
	rows, err := r.pool.Query(ctx, selectMembershipsOfUser, userID)
	if err != nil {
		return org.Membership{}, false, fmt.Errorf("memberships: %w", err)
	}
	ms, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (org.Membership, error) {
		m := org.Membership{User: org.Person{ID: userID}}
		var role string
		err := row.Scan(&m.ID, &m.OrganizationID, &role, &m.CreatedAt)
		m.Role, m.CreatedAt = org.Role(role), m.CreatedAt.UTC()
		return m, err
	})
	if err != nil {
		return org.Membership{}, false, fmt.Errorf("memberships: %w", err)
	}
	if len(ms) != 1 {
		return org.Membership{}, false, nil
	}
	return ms[0], true, nil
}

// InvitationOrganization implements org.Repository.
func (r *OrganizationRepository) InvitationOrganization(ctx context.Context, invitationID string) (string, error) {
	var id string
	if err := r.pool.QueryRow(ctx, selectInvitationOrg, invitationID).Scan(&id); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", org.ErrInvitationNotFound
		}
		return "", fmt.Errorf("get invitation: %w", err)
	}
	return id, nil
}

// Update implements org.Repository: the organization row is locked, so concurrent changes to
// one organization (two admins removing the last two owners) are serialised and the rules
// hold. Members the function removed are deleted, new ones inserted (each within its user's
// ceiling; the user's row is locked after the organization's, the order Add and the key
// repository keep too), and every invitation it holds is upserted.
func (r *OrganizationRepository) Update(ctx context.Context, id string, updateFunc func(context.Context, *org.Organization) error) error {
	return pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		o, err := load(ctx, tx, lockOrganization, id)
		if err != nil {
			return err
		}
		before := map[string]bool{}
		for _, m := range o.Members() {
			before[m.ID] = true
		}
		if err := updateFunc(ctx, o); err != nil {
			return err
		}
		for _, m := range o.Members() {
			if before[m.ID] {
				delete(before, m.ID)
				continue
			}
			if err := r.admit(ctx, tx, m.User.ID); err != nil {
				return err
			}
			if err := addMember(ctx, tx, m); err != nil {
				return err
			}
		}
		if len(before) > 0 {
			gone := make([]string, 0, len(before))
			for mid := range before {
				gone = append(gone, mid)
			}
			if _, err := tx.Exec(ctx, deleteMembers, id, gone); err != nil {
				return fmt.Errorf("delete members: %w", err)
			}
		}
		for _, inv := range o.Invitations() {
			if err := saveInvitation(ctx, tx, inv); err != nil {
				return err
			}
		}
		return nil
	})
}
