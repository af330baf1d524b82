-- The ledger (issue 38): one row per call, one per attempt. Times are Unix milliseconds (UTC),
-- costs USD. `id` is a random id minted when the row is made, so a row replayed from the spool
-- after a database outage is written once (INSERT ... ON CONFLICT DO NOTHING).
CREATE TABLE ledger_calls (
    id TEXT PRIMARY KEY NOT NULL,
    at_ms BIGINT NOT NULL,
    request_id TEXT NOT NULL,
    key_id TEXT,
    tenant TEXT,
    sub_tenant TEXT,
    route TEXT NOT NULL,
    link TEXT,
    deployment TEXT,
    model TEXT,
    tokens_in BIGINT NOT NULL,
    tokens_out BIGINT NOT NULL,
    tokens_cached BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION,
    outcome TEXT NOT NULL,
    latency_ms BIGINT NOT NULL,
    degraded BOOLEAN NOT NULL,
    served_by TEXT,
    attempts BIGINT NOT NULL
);
CREATE INDEX ledger_calls_tenant_at ON ledger_calls (tenant, at_ms);
CREATE INDEX ledger_calls_key_at ON ledger_calls (key_id, at_ms);
CREATE INDEX ledger_calls_at ON ledger_calls (at_ms);

CREATE TABLE ledger_attempts (
    id TEXT PRIMARY KEY NOT NULL,
    call_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    request_id TEXT NOT NULL,
    key_id TEXT,
    tenant TEXT,
    sub_tenant TEXT,
    route TEXT NOT NULL,
    link TEXT NOT NULL,
    deployment TEXT,
    model TEXT NOT NULL,
    tokens_in BIGINT NOT NULL,
    tokens_out BIGINT NOT NULL,
    tokens_cached BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION,
    outcome TEXT NOT NULL,
    status BIGINT,
    latency_ms BIGINT NOT NULL,
    degraded BOOLEAN NOT NULL,
    served_by TEXT
);
CREATE INDEX ledger_attempts_call ON ledger_attempts (call_id);
CREATE INDEX ledger_attempts_at ON ledger_attempts (at_ms);
