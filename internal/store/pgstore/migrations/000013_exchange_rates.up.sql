-- Exchange rates kept by hand (internal/rates): never fetched from anywhere. One rate per
-- company, currency pair and day: one unit of base is worth rate units of quote. A
-- correction replaces the day's rate; conversions keep the rate they were converted with.
CREATE TABLE exchange_rates (
    company_id text          NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    base       char(3)       NOT NULL,
    quote      char(3)       NOT NULL CHECK (quote <> base),
    day        date          NOT NULL,
    -- exact: 12 digits before the point and 12 after (money.ParseRate)
    rate       numeric(24, 12) NOT NULL CHECK (rate > 0),
    updated_at timestamptz   NOT NULL,
    PRIMARY KEY (company_id, base, quote, day)
);
-- lists newest day first
CREATE INDEX exchange_rates_day ON exchange_rates (company_id, day DESC, base, quote);

-- How old a rate a program's conversions may still use, in days before the conversion's date.
ALTER TABLE programs ADD COLUMN max_rate_age_days integer NOT NULL DEFAULT 7 CHECK (max_rate_age_days BETWEEN 0 AND 365);

-- The snapshot of a conversion made in another currency than its program's, on the
-- conversion and copied onto its commission (lists read commissions alone). All NULL for a
-- conversion in the program currency. converted_amount is in the program currency (for the
-- conversion it equals amount). Written once, never updated.
ALTER TABLE conversions
    ADD COLUMN original_amount   bigint CHECK (original_amount >= 0),
    ADD COLUMN original_currency char(3),
    ADD COLUMN exchange_rate     numeric(24, 12) CHECK (exchange_rate > 0),
    ADD COLUMN rate_date         date,
    ADD COLUMN converted_amount  bigint CHECK (converted_amount >= 0),
    ADD CONSTRAINT conversions_exchange_whole CHECK (num_nulls(original_amount, original_currency, exchange_rate, rate_date, converted_amount) IN (0, 5));
ALTER TABLE commissions
    ADD COLUMN original_amount   bigint CHECK (original_amount >= 0),
    ADD COLUMN original_currency char(3),
    ADD COLUMN exchange_rate     numeric(24, 12) CHECK (exchange_rate > 0),
    ADD COLUMN rate_date         date,
    ADD COLUMN converted_amount  bigint CHECK (converted_amount >= 0),
    ADD CONSTRAINT commissions_exchange_whole CHECK (num_nulls(original_amount, original_currency, exchange_rate, rate_date, converted_amount) IN (0, 5));
