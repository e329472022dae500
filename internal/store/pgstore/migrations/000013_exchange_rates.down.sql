ALTER TABLE commissions DROP CONSTRAINT IF EXISTS commissions_exchange_whole, DROP COLUMN IF EXISTS original_amount,
    DROP COLUMN IF EXISTS original_currency, DROP COLUMN IF EXISTS exchange_rate, DROP COLUMN IF EXISTS rate_date,
    DROP COLUMN IF EXISTS converted_amount;
ALTER TABLE conversions DROP CONSTRAINT IF EXISTS conversions_exchange_whole, DROP COLUMN IF EXISTS original_amount,
    DROP COLUMN IF EXISTS original_currency, DROP COLUMN IF EXISTS exchange_rate, DROP COLUMN IF EXISTS rate_date,
    DROP COLUMN IF EXISTS converted_amount;
ALTER TABLE programs DROP COLUMN IF EXISTS max_rate_age_days;
DROP TABLE IF EXISTS exchange_rates;
