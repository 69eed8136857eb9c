-- The account system: people, their credentials and sessions, the organizations they belong
-- to, invitations, organization-owned API keys and one-time verification tokens. Secrets
-- (session tokens, API keys, reset tokens) are stored only as hashes.

-- +goose Up
CREATE TABLE users (
    id             text PRIMARY KEY,
    email          text NOT NULL,
    name           text NOT NULL DEFAULT '',
    email_verified boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- One row per way a user can sign in; the password lives here, never in users.
CREATE TABLE accounts (
    id            text PRIMARY KEY,
    user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_id   text NOT NULL,
    account_id    text NOT NULL,
    password_hash text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider_id, account_id)
);
CREATE INDEX accounts_user_id_idx ON accounts (user_id);

CREATE TABLE organizations (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    slug       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE members (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role            text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, user_id)
);
CREATE INDEX members_user_id_idx ON members (user_id);

CREATE TABLE sessions (
    id                     text PRIMARY KEY,
    token_hash             bytea NOT NULL UNIQUE,
    user_id                text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    active_organization_id text REFERENCES organizations (id) ON DELETE SET NULL,
    expires_at             timestamptz NOT NULL,
    ip_address             text NOT NULL DEFAULT '',
    user_agent             text NOT NULL DEFAULT '',
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);

CREATE TABLE invitations (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email           text NOT NULL,
    role            text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    status          text NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected', 'canceled')),
    inviter_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX invitations_organization_id_idx ON invitations (organization_id);

CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    name         text NOT NULL,
    start        text NOT NULL,
    key_hash     text NOT NULL UNIQUE,
    reference_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    created_by   text REFERENCES users (id) ON DELETE SET NULL,
    enabled      boolean NOT NULL DEFAULT true,
    expires_at   timestamptz,
    last_request timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_reference_id_idx ON api_keys (reference_id);

-- Password-reset and similar one-time tokens, stored hashed.
CREATE TABLE verifications (
    id         text PRIMARY KEY,
    identifier text NOT NULL,
    value_hash text NOT NULL UNIQUE,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE verifications;
DROP TABLE api_keys;
DROP TABLE invitations;
DROP TABLE sessions;
DROP TABLE members;
DROP TABLE organizations;
DROP TABLE accounts;
DROP TABLE users;
