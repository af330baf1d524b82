-- Gateway keys kept in the store (issue 38), beside the config file's keys. Only the SHA-256 of
-- a secret is kept (`digest`, lowercase hex); the secret is shown once, when it is made.
-- During a rotation the previous secret's digest stays valid until `prev_until_ms`.
-- Times are Unix milliseconds (UTC); `revoked_ms` set means the key no longer works.
CREATE TABLE gateway_keys (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT,
    tenant TEXT,
    digest TEXT NOT NULL UNIQUE,
    prev_digest TEXT,
    prev_until_ms BIGINT,
    routes TEXT,
    rpm BIGINT,
    tpm BIGINT,
    budget_tokens BIGINT,
    expires_ms BIGINT,
    revoked_ms BIGINT,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- Every admin action on keys: who (the admin key's label), what, on which key, and the change
-- as JSON (never a secret).
CREATE TABLE admin_audit (
    id TEXT PRIMARY KEY NOT NULL,
    at_ms BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    key_id TEXT,
    detail TEXT NOT NULL
);
CREATE INDEX admin_audit_at ON admin_audit (at_ms);
