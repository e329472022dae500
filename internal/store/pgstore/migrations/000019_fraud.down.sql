DROP INDEX IF EXISTS conversions_order;
DROP INDEX IF EXISTS conversions_customer_email;
ALTER TABLE conversions DROP COLUMN IF EXISTS customer_email_hash;
DROP INDEX IF EXISTS commissions_held;
ALTER TABLE commissions DROP COLUMN IF EXISTS held_at;
DROP TABLE IF EXISTS fraud_verdicts;
DROP TABLE IF EXISTS fraud_exemptions;
DROP TABLE IF EXISTS fraud_settings;
