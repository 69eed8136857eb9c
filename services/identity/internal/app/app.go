// Package app is identity's application layer: the use cases (command and query), wired
// together over the ports they need.
package app

import (
	"log/slog"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/command"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/app/query"
)

// Application is every use case of identity.
type Application struct {
	Commands Commands
	Queries  Queries
}

// Commands are the use cases that change state.
type Commands struct {
	SignUp                command.SignUpHandler
	SignIn                command.SignInHandler
	SignOut               command.SignOutHandler
	ChangePassword        command.ChangePasswordHandler
	RequestPasswordReset  command.RequestPasswordResetHandler
	ResetPassword         command.ResetPasswordHandler
	CreateOrganization    command.CreateOrganizationHandler
	SetActiveOrganization command.SetActiveOrganizationHandler
	InviteMember          command.InviteMemberHandler
	AcceptInvitation      command.AcceptInvitationHandler
	RemoveMember          command.RemoveMemberHandler
	LeaveOrganization     command.LeaveOrganizationHandler
	CreateAPIKey          command.CreateAPIKeyHandler
	RevokeAPIKey          command.RevokeAPIKeyHandler
	Bootstrap             command.BootstrapHandler
}

// Queries are the read-only use cases.
type Queries struct {
	Authenticate      query.AuthenticateHandler
	Resolve           query.ResolveHandler
	VerifyAPIKey      query.VerifyAPIKeyHandler
	ListOrganizations query.ListOrganizationsHandler
	ListMembers       query.ListMembersHandler
	ListAPIKeys       query.ListAPIKeysHandler
	// LookupOrganization serves identity.v1 LookupOrganization (webhook-ingress's slugs).
	LookupOrganization query.LookupOrganizationHandler
}

// Dependencies is what the use cases are built from.
type Dependencies struct {
	Repos  port.Repositories
	Hasher port.PasswordHasher
	Mailer port.Mailer
	// Limits are the attempt limiters of sign-in, sign-up, the password reset,
	// change-password and accept-invitation.
	Limits   port.Limits
	KeyUsage port.KeyUsage
	// ResetLink builds the URL mailed for a reset token; InvitationLink the one for an
	// invitation.
	ResetLink      func(token, redirectTo string) string
	InvitationLink func(invitationID string) string
	// BootstrapEnabled is SVC_BOOTSTRAP=1.
	BootstrapEnabled bool
	Now              func() time.Time
	Log              *slog.Logger
}

// New wires the use cases; a missing dependency panics.
func New(d Dependencies) Application {
	d.Repos.Validate()
	d.Limits.Validate()
	r, l := d.Repos, d.Limits
	a := auth.NewAuthenticator(r.Sessions, r.Organizations, d.Now, d.Log)
	return Application{
		Commands: Commands{
			SignUp:                command.NewSignUpHandler(r.Registrar, d.Hasher, l.SignUp, d.Now),
			SignIn:                command.NewSignInHandler(r.Users, r.Organizations, r.Sessions, d.Hasher, l.SignIn, d.Now),
			SignOut:               command.NewSignOutHandler(r.Sessions),
			ChangePassword:        command.NewChangePasswordHandler(r.Users, r.Sessions, d.Hasher, l.ChangePassword, d.Now),
			RequestPasswordReset:  command.NewRequestPasswordResetHandler(r.Users, r.ResetTokens, d.Mailer, l.PasswordReset, d.ResetLink, d.Now, d.Log),
			ResetPassword:         command.NewResetPasswordHandler(r.ResetTokens, d.Hasher, l.PasswordReset, d.Now),
			CreateOrganization:    command.NewCreateOrganizationHandler(r.Organizations, r.Sessions, d.Now),
			SetActiveOrganization: command.NewSetActiveOrganizationHandler(r.Organizations, r.Sessions, d.Now),
			InviteMember:          command.NewInviteMemberHandler(r.Organizations, d.Mailer, d.InvitationLink, d.Now, d.Log),
			AcceptInvitation:      command.NewAcceptInvitationHandler(r.Organizations, r.Sessions, l.AcceptInvitation, d.Now),
			RemoveMember:          command.NewRemoveMemberHandler(r.Organizations),
			LeaveOrganization:     command.NewLeaveOrganizationHandler(r.Organizations),
			CreateAPIKey:          command.NewCreateAPIKeyHandler(r.Organizations, r.Keys, d.Now),
			RevokeAPIKey:          command.NewRevokeAPIKeyHandler(r.Organizations, r.Keys),
			Bootstrap:             command.NewBootstrapHandler(r.Registrar, d.Hasher, d.BootstrapEnabled, d.Now),
		},
		Queries: Queries{
			Authenticate:       query.NewAuthenticateHandler(a),
			Resolve:            query.NewResolveHandler(a, r.Keys, d.KeyUsage),
			VerifyAPIKey:       query.NewVerifyAPIKeyHandler(a, r.Keys, d.KeyUsage),
			ListOrganizations:  query.NewListOrganizationsHandler(r.Organizations),
			ListMembers:        query.NewListMembersHandler(r.Organizations),
			ListAPIKeys:        query.NewListAPIKeysHandler(r.Organizations, r.Keys),
			LookupOrganization: query.NewLookupOrganizationHandler(r.Organizations),
		},
	}
}
