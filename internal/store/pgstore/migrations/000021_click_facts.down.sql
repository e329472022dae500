DROP INDEX IF EXISTS conversions_click_pending;
ALTER TABLE conversions DROP COLUMN IF EXISTS click_pending, DROP COLUMN IF EXISTS click_device_type,
    DROP COLUMN IF EXISTS click_country;
