-- The daily e-mail of fraud holds (internal/fraudreview, docs/fraud.md "The daily summary"):
-- one row per advertiser and UTC day it was sent. The api replica that inserts the row sends
-- the e-mail in the same transaction; another replica's insert waits on it, then finds the
-- row and sends nothing. A failed send rolls the row back, and the next run tries again.
CREATE TABLE fraud_summaries (
    advertiser_id text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    day           date        NOT NULL,
    sent_at       timestamptz NOT NULL,
    recipients    integer     NOT NULL CHECK (recipients >= 0),
    PRIMARY KEY (advertiser_id, day)
);

-- The review queue lists an advertiser's commissions that a rule fired on, newest first;
-- without this it would walk all of the advertiser's commissions to find the few flagged.
CREATE INDEX fraud_verdicts_code ON fraud_verdicts (code, commission_id);
