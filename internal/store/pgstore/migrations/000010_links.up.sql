-- Tracking links: an advertiser lists the links of its programs newest first, so it needs the
-- same (owner, id) index the affiliate side has (tracking_links_affiliate).
CREATE INDEX tracking_links_advertiser ON tracking_links (advertiser_id, id);
