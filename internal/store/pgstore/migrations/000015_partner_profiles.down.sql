DROP TABLE IF EXISTS partner_profiles;
