DROP INDEX IF EXISTS tracking_links_advertiser;
