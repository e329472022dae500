-- The health of each delivery target (a webhook, or a company's postback URL) and its circuit
-- breaker (internal/delivery, breaker.go; docs/webhooks.md, "Dead receivers"). One row per
-- target that was ever attempted, shared by every deliver replica: the breaker opens after
-- consecutive failures whoever saw them, and one replica at a time probes an open target.
CREATE TABLE delivery_endpoints (
    kind                 text        NOT NULL CHECK (kind IN ('webhook', 'postback')),
    -- wh_... for a webhook; the company id for its postback URL (as deliveries.target_id).
    target_id            text        NOT NULL,
    company_id           text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- Attempts that reached the network and failed since the last success.
    consecutive_failures integer     NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    -- Set while the breaker is open: attempts before it are not sent (they fail at once);
    -- from then on one probe at a time is.
    open_until           timestamptz NULL,
    -- A replica took the probe until then; the others keep failing fast meanwhile.
    probe_until          timestamptz NULL,
    last_success_at      timestamptz NULL,
    last_failure_at      timestamptz NULL,
    -- The first failure since the last success (NULL after a success): how long it has been dead.
    failing_since        timestamptz NULL,
    -- Set when the target was disabled for failing without a success for the period
    -- (--deliver-disable-after-days); its owners are told by e-mail (notified_at).
    disabled_at          timestamptz NULL,
    notified_at          timestamptz NULL,
    updated_at           timestamptz NOT NULL,
    PRIMARY KEY (kind, target_id)
);

-- The breaker's refresh: the targets open now (few).
CREATE INDEX delivery_endpoints_open_idx ON delivery_endpoints (open_until) WHERE open_until IS NOT NULL;
