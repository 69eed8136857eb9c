package httpapi

import (
	"net/http"

	"svc.dev/services/identity/internal/app/command"
	"svc.dev/services/identity/internal/app/query"
)

type createOrganizationRequest struct {
	Name                          string `json:"name"`
	Slug                          string `json:"slug"`
	KeepCurrentActiveOrganization bool   `json:"keepCurrentActiveOrganization"`
}

func (s *Server) createOrganization(w http.ResponseWriter, r *http.Request) error {
	var req createOrganizationRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	if _, err := c.RequireSession(); err != nil {
		return err
	}
	if err := required("name", req.Name); err != nil {
		return err
	}
	if err := required("slug", req.Slug); err != nil {
		return err
	}
	o, err := s.app.Commands.CreateOrganization.Handle(r.Context(), command.CreateOrganization{Caller: c, Name: req.Name, Slug: req.Slug,
		KeepCurrentActive: req.KeepCurrentActiveOrganization})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCreatedOrganizationResponse(o))
	return nil
}

type setActiveRequest struct {
	OrganizationID   nullableString `json:"organizationId"`
	OrganizationSlug string         `json:"organizationSlug"`
}

func (s *Server) setActiveOrganization(w http.ResponseWriter, r *http.Request) error {
	var req setActiveRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	p, err := s.app.Commands.SetActiveOrganization.Handle(r.Context(), command.SetActiveOrganization{Caller: c,
		OrganizationID: req.OrganizationID.Value, Slug: req.OrganizationSlug, Clear: req.OrganizationID.Null && req.OrganizationSlug == ""})
	if err != nil {
		return err
	}
	if p == nil {
		writeJSON(w, http.StatusOK, nil)
		return nil
	}
	writeJSON(w, http.StatusOK, toOrganizationResponse(*p))
	return nil
}

func (s *Server) listOrganizations(w http.ResponseWriter, r *http.Request) error {
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	ps, err := s.app.Queries.ListOrganizations.Handle(r.Context(), query.ListOrganizations{Caller: c})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toOrganizationsResponse(ps))
	return nil
}

type inviteMemberRequest struct {
	Email          string `json:"email"`
	Role           string `json:"role"`
	OrganizationID string `json:"organizationId"`
	Resend         bool   `json:"resend"`
}

func (s *Server) inviteMember(w http.ResponseWriter, r *http.Request) error {
	var req inviteMemberRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	if _, err := c.RequireSession(); err != nil {
		return err
	}
	if err := required("email", req.Email); err != nil {
		return err
	}
	if err := required("role", req.Role); err != nil {
		return err
	}
	inv, err := s.app.Commands.InviteMember.Handle(r.Context(), command.InviteMember{Caller: c, OrganizationID: req.OrganizationID,
		Email: req.Email, Role: req.Role, Resend: req.Resend})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toInvitationResponse(inv))
	return nil
}

type acceptInvitationRequest struct {
	InvitationID string `json:"invitationId"`
}

type acceptInvitationResponse struct {
	Invitation invitationResponse `json:"invitation"`
	Member     memberResponse     `json:"member"`
}

func (s *Server) acceptInvitation(w http.ResponseWriter, r *http.Request) error {
	var req acceptInvitationRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	inv, m, err := s.app.Commands.AcceptInvitation.Handle(r.Context(), command.AcceptInvitation{Caller: c, InvitationID: req.InvitationID,
		IPAddress: s.clientIP(r)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, acceptInvitationResponse{Invitation: toInvitationResponse(inv), Member: toMemberResponse(m, false)})
	return nil
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) error {
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	ms, err := s.app.Queries.ListMembers.Handle(r.Context(), query.ListMembers{Caller: c, OrganizationID: r.URL.Query().Get("organizationId")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toMembersResponse(ms))
	return nil
}

type removeMemberRequest struct {
	MemberIDOrEmail string `json:"memberIdOrEmail"`
	OrganizationID  string `json:"organizationId"`
}

type removeMemberResponse struct {
	Member memberResponse `json:"member"`
}

func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) error {
	var req removeMemberRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	m, err := s.app.Commands.RemoveMember.Handle(r.Context(), command.RemoveMember{Caller: c, OrganizationID: req.OrganizationID,
		MemberIDOrEmail: req.MemberIDOrEmail})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, removeMemberResponse{Member: toMemberResponse(m, false)})
	return nil
}

type leaveRequest struct {
	OrganizationID string `json:"organizationId"`
}

func (s *Server) leaveOrganization(w http.ResponseWriter, r *http.Request) error {
	var req leaveRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	if _, err := s.app.Commands.LeaveOrganization.Handle(r.Context(), command.LeaveOrganization{Caller: c, OrganizationID: req.OrganizationID}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, successResponse{Success: true})
	return nil
}
