-- Customers, recurring commissions and affiliate coupon codes (docs/conversions.md,
-- "Customers, recurring commissions and coupon codes").

-- The program decides whether a touch of another affiliate takes a bound customer over
-- (last_click) or not (first_affiliate), and how long a binding lasts (NULL: for life).
ALTER TABLE programs
    ADD COLUMN attribution_rule     text    NOT NULL DEFAULT 'first_affiliate' CHECK (attribution_rule IN ('first_affiliate', 'last_click')),
    ADD COLUMN customer_window_days integer CHECK (customer_window_days BETWEEN 1 AND 3650),
    -- recurring commissions of the rule: for so many months after the customer's first
    -- conversion, or for life; neither: only a customer's first conversion earns
    ADD COLUMN recurring_months     integer CHECK (recurring_months BETWEEN 1 AND 120),
    ADD COLUMN recurring_lifetime   boolean NOT NULL DEFAULT false,
    ADD CHECK (NOT (recurring_lifetime AND recurring_months IS NOT NULL));

-- A partnership's override replaces the whole rule, its recurring part included.
ALTER TABLE partnerships
    ADD COLUMN recurring_months   integer CHECK (recurring_months BETWEEN 1 AND 120),
    ADD COLUMN recurring_lifetime boolean NOT NULL DEFAULT false,
    ADD CHECK (NOT (recurring_lifetime AND recurring_months IS NOT NULL));

-- An advertiser's codes, each given to one partnership; unique per advertiser whatever the case.
CREATE TABLE coupon_codes (
    id             text PRIMARY KEY,
    advertiser_id  text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    program_id     text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    partnership_id text        NOT NULL REFERENCES partnerships (id) ON DELETE CASCADE,
    affiliate_id   text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    code           text        NOT NULL CHECK (code ~ '^[A-Za-z0-9_-]{1,64}$'),
    created_at     timestamptz NOT NULL
);
CREATE UNIQUE INDEX coupon_codes_advertiser_code ON coupon_codes (advertiser_id, lower(code));
CREATE INDEX coupon_codes_partnership ON coupon_codes (partnership_id, id);

-- A customer of a program is bound to the partnership that earned its first attributed
-- conversion. The primary key is what makes concurrent first conversions safe: one insert
-- wins, the others wait for it and then see its binding.
CREATE TABLE customers (
    program_id          text        NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    customer_id         text        NOT NULL CHECK (length(customer_id) BETWEEN 1 AND 128),
    advertiser_id       text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- with program_id, names the partnership
    affiliate_id        text        NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    -- the conversion that bound it (again, after a take-over) and when it occurred: the
    -- customer window and the recurring period count from then
    first_conversion_id text        NOT NULL,
    bound_at            timestamptz NOT NULL,
    PRIMARY KEY (program_id, customer_id)
);
-- a conversion naming only the customer finds its program
CREATE INDEX customers_advertiser ON customers (advertiser_id, customer_id);

-- What decided each conversion, and the touch behind it.
ALTER TABLE conversions
    ALTER COLUMN clicked_at DROP NOT NULL,
    ADD COLUMN attribution text NOT NULL DEFAULT 'click' CHECK (attribution IN ('click', 'coupon', 'customer')),
    ADD COLUMN coupon_code text NOT NULL DEFAULT '',
    ADD COLUMN customer_id text NOT NULL DEFAULT '' CHECK (length(customer_id) <= 128),
    DROP CONSTRAINT conversions_type_check,
    ADD CONSTRAINT conversions_type_check CHECK (type IN ('sale', 'lead', 'signup', 'install', 'custom', 'renewal'));
CREATE INDEX conversions_customer ON conversions (program_id, customer_id) WHERE customer_id <> '';
