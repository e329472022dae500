DROP INDEX conversions_customer;
DELETE FROM conversions WHERE clicked_at IS NULL OR type = 'renewal';
ALTER TABLE conversions
    DROP CONSTRAINT conversions_type_check,
    ADD CONSTRAINT conversions_type_check CHECK (type IN ('sale', 'lead', 'signup', 'install', 'custom')),
    DROP COLUMN customer_id,
    DROP COLUMN coupon_code,
    DROP COLUMN attribution,
    ALTER COLUMN clicked_at SET NOT NULL;
DROP TABLE customers;
DROP TABLE coupon_codes;
ALTER TABLE partnerships DROP COLUMN recurring_lifetime, DROP COLUMN recurring_months;
ALTER TABLE programs DROP COLUMN recurring_lifetime, DROP COLUMN recurring_months, DROP COLUMN customer_window_days,
    DROP COLUMN attribution_rule;
