DROP TABLE IF EXISTS program_postback_tokens;
DROP TABLE IF EXISTS commissions;
DROP TABLE IF EXISTS conversions;
DROP TABLE IF EXISTS payouts;
