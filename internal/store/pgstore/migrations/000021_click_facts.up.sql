-- The conversion's click as ingest enriched it (docs/fraud.md, "The click stage"): its
-- country and device type, which the conversion's events carry, read from ClickHouse at
-- registration or, when the click was not there yet, by the api's late-click loop; and
-- click_pending while that loop still waits for the click. NULL: not known.
ALTER TABLE conversions ADD COLUMN click_country text CHECK (length(click_country) <= 2),
    ADD COLUMN click_device_type text CHECK (length(click_device_type) <= 16),
    ADD COLUMN click_pending boolean NOT NULL DEFAULT false;
-- The late-click loop's queue: only the conversions still waiting are in it.
CREATE INDEX conversions_click_pending ON conversions (created_at) WHERE click_pending;
