DROP TABLE IF EXISTS tracking_scripts;
DELETE FROM api_keys WHERE kind = 'publishable';
ALTER TABLE api_keys DROP COLUMN IF EXISTS program_id, DROP COLUMN IF EXISTS kind;
DROP TABLE IF EXISTS stripe_reversals;
DROP TABLE IF EXISTS stripe_payments;
DROP TABLE IF EXISTS stripe_events;
DROP TABLE IF EXISTS stripe_integrations;
-- NOT VALID: the conversions Stripe registered stay; only new rows are held to the old rule.
ALTER TABLE conversions DROP CONSTRAINT conversions_source_check,
    ADD CONSTRAINT conversions_source_check CHECK (source IN ('api', 'postback')) NOT VALID;
