package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/user"
)

// authError is an auth-layer error as better-auth sends it: {code, message} with a status.
type authError struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is set for RATE_LIMITED.
	RetryAfter time.Duration
}

// originError says why the Origin check failed.
type originError struct{ missing bool }

func (e *originError) Error() string {
	if e.missing {
		return "missing or null Origin"
	}
	return "invalid origin"
}

// errTooLarge is a body over the limit.
var errTooLarge = errors.New("request body is larger than 1 MiB")

// errNotJSON is a body that does not say it is JSON (the bootstrap requires it).
var errNotJSON = errors.New("the Content-Type must be application/json")

// busyRetryAfter is what a client is told to wait when every password-hashing slot was taken
// (port.ErrHasherBusy): one hash takes tens of milliseconds, so a slot is free again soon.
const busyRetryAfter = time.Second

// toAuthError is the error table of /api/auth/*: every domain and app error maps to exactly
// one code and status here, and nothing else decides a status. Anything not in
// the table is an internal error whose cause is logged and never sent.
func toAuthError(err error) authError {
	var (
		verr *auth.ValidationError
		rl   *auth.RateLimitedError
		oe   *originError
	)
	switch {
	case errors.As(err, &oe):
		if oe.missing {
			return authError{http.StatusForbidden, "MISSING_OR_NULL_ORIGIN", "Missing or null Origin", 0}
		}
		return authError{http.StatusForbidden, "INVALID_ORIGIN", "Invalid origin", 0}
	case errors.As(err, &verr):
		return authError{http.StatusBadRequest, "VALIDATION_ERROR", verr.Error(), 0}
	case errors.As(err, &rl):
		return authError{http.StatusTooManyRequests, "RATE_LIMITED", "Too many attempts; retry later", rl.RetryAfter}
	case errors.Is(err, port.ErrHasherBusy):
		return authError{http.StatusTooManyRequests, "RATE_LIMITED", "Too many password checks at once; retry shortly", busyRetryAfter}
	case errors.Is(err, errTooLarge):
		return authError{http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", err.Error(), 0}
	case errors.Is(err, user.ErrPasswordTooShort):
		return authError{http.StatusBadRequest, "PASSWORD_TOO_SHORT", "Password too short", 0}
	case errors.Is(err, user.ErrPasswordTooLong):
		return authError{http.StatusBadRequest, "PASSWORD_TOO_LONG", "Password too long", 0}
	case errors.Is(err, user.ErrInvalidEmail), errors.Is(err, user.ErrInvalidName),
		errors.Is(err, org.ErrInvalidName), errors.Is(err, org.ErrInvalidSlug), errors.Is(err, org.ErrInvalidRole),
		errors.Is(err, apikey.ErrInvalidName), errors.Is(err, apikey.ErrInvalidExpiry), errors.Is(err, apikey.ErrInvalidPrefix):
		return authError{http.StatusBadRequest, "VALIDATION_ERROR", err.Error(), 0}
	case errors.Is(err, user.ErrEmailTaken):
		return authError{http.StatusUnprocessableEntity, "USER_ALREADY_EXISTS", "User already exists. Use another email.", 0}
	case errors.Is(err, user.ErrNotFound):
		return authError{http.StatusNotFound, "USER_NOT_FOUND", "User not found", 0}
	case errors.Is(err, auth.ErrInvalidCredentials):
		return authError{http.StatusUnauthorized, "INVALID_CREDENTIALS", "Invalid email or password", 0}
	case errors.Is(err, auth.ErrUnauthenticated):
		return authError{http.StatusUnauthorized, "UNAUTHORIZED", "Unauthorized", 0}
	case errors.Is(err, auth.ErrKeyCannotManageKeys):
		return authError{http.StatusUnauthorized, "INVALID_REFERENCE_ID_FROM_API_KEY", "The reference id from the API key is invalid.", 0}
	case errors.Is(err, auth.ErrNoActiveOrganization):
		return authError{http.StatusBadRequest, "NO_ACTIVE_ORGANIZATION", "No active organization", 0}
	case errors.Is(err, auth.ErrInvalidResetToken):
		return authError{http.StatusBadRequest, "INVALID_TOKEN", "Invalid token", 0}
	case errors.Is(err, auth.ErrInvalidAPIKey):
		return authError{http.StatusUnauthorized, "INVALID_TOKEN", "Invalid API key", 0}
	case errors.Is(err, org.ErrSlugTaken):
		return authError{http.StatusBadRequest, "ORGANIZATION_ALREADY_EXISTS", "Organization already exists", 0}
	case errors.Is(err, org.ErrNotMember):
		return authError{http.StatusForbidden, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION", "User is not a member of the organization", 0}
	case errors.Is(err, org.ErrForbidden):
		return authError{http.StatusForbidden, "FORBIDDEN", "Your role in the organization does not allow this", 0}
	case errors.Is(err, org.ErrOnlyOwner):
		return authError{http.StatusBadRequest, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER", "You cannot leave the organization as the only owner", 0}
	case errors.Is(err, org.ErrMemberNotFound):
		return authError{http.StatusBadRequest, "MEMBER_NOT_FOUND", "Member not found", 0}
	case errors.Is(err, org.ErrAlreadyMember):
		return authError{http.StatusBadRequest, "USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION", "User is already a member of this organization", 0}
	case errors.Is(err, org.ErrAlreadyInvited):
		return authError{http.StatusBadRequest, "USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION", "User is already invited to this organization", 0}
	case errors.Is(err, org.ErrInvitationNotFound):
		return authError{http.StatusBadRequest, "INVITATION_NOT_FOUND", "Invitation not found", 0}
	case errors.Is(err, org.ErrNotRecipient):
		return authError{http.StatusForbidden, "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION", "You are not the recipient of the invitation", 0}
	case errors.Is(err, org.ErrTooManyOrganizations):
		// better-auth's own code and status for its organizationLimit.
		return authError{http.StatusForbidden, "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_ORGANIZATIONS", "You have reached the maximum number of organizations", 0}
	case errors.Is(err, org.ErrTooManyInvitations):
		// better-auth's own code and status for its invitationLimit.
		return authError{http.StatusForbidden, "INVITATION_LIMIT_REACHED", "Invitation limit reached", 0}
	case errors.Is(err, apikey.ErrTooManyKeys):
		// better-auth has no ceiling on keys, so no code: ours follows its organization one.
		return authError{http.StatusForbidden, "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_API_KEYS", "The organization has reached the maximum number of API keys", 0}
	case errors.Is(err, apikey.ErrTooManyKeysOfUser):
		return authError{http.StatusForbidden, "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_API_KEYS", "You have reached the maximum number of API keys", 0}
	case errors.Is(err, apikey.ErrNotFound):
		return authError{http.StatusNotFound, "KEY_NOT_FOUND", "API Key not found", 0}
	default:
		return authError{http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "Internal server error", 0}
	}
}

// writeAuthError answers err in the auth layer's shape; 5xx causes are logged, never sent.
func (s *Server) writeAuthError(w http.ResponseWriter, r *http.Request, err error) {
	e := toAuthError(err)
	if e.Status >= http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "request failed", "err", err, "method", r.Method, "path", r.URL.Path)
	}
	body := map[string]any{"code": e.Code, "message": e.Message}
	switch e.Status {
	case http.StatusRequestEntityTooLarge:
		// The public API names this one for every route; both readers find their member.
		body["error"] = string(errs.PayloadTooLarge)
	case http.StatusTooManyRequests:
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		// Rounded up, and at least 1: a wait under a millisecond (the window is about to
		// reopen) is not "retry now" (found by the HTTP fuzzer: retryAfterMs 0).
		body["retryAfterMs"] = max(int64((e.RetryAfter+time.Millisecond-1)/time.Millisecond), 1)
	}
	writeJSON(w, e.Status, body)
}

// toBootstrapError is the table of /api/bootstrap, which answers in the service shape
// {error, ...} (it is not under /api/auth): closed is 404 not_found whatever the reason, and a
// bad request is invalid_body with issues.
func toBootstrapError(err error) *errs.Error {
	var verr *auth.ValidationError
	field := ""
	switch {
	case errors.Is(err, auth.ErrBootstrapClosed):
		return errs.New(errs.NotFound, nil)
	case errors.Is(err, errTooLarge):
		return errs.Newf(errs.PayloadTooLarge, "%s", err.Error())
	case errors.Is(err, port.ErrHasherBusy):
		return errs.Newf(errs.RateLimited, "too many password checks at once; retry shortly").
			With("retryAfterMs", busyRetryAfter.Milliseconds())
	case errors.Is(err, errNotJSON):
		field = ""
	case errors.As(err, &verr):
		field = verr.Field
	case errors.Is(err, user.ErrInvalidEmail):
		field = "email"
	case errors.Is(err, user.ErrPasswordTooShort), errors.Is(err, user.ErrPasswordTooLong):
		field = "password"
	case errors.Is(err, user.ErrInvalidName):
		field = "name"
	case errors.Is(err, org.ErrInvalidName):
		field = "organizationName"
	default:
		return errs.New(errs.InternalOnlyLog, err)
	}
	msg := err.Error()
	if verr != nil {
		msg = verr.Message
	}
	path := ""
	if field != "" {
		path = wire.Pointer(field)
	}
	return errs.New(errs.InvalidBody, nil).WithMessage(msg).With("issues", []wire.Issue{{Path: path, Message: msg}})
}
