DROP TABLE onboarding;
DROP TABLE test_conversions;
ALTER TABLE partnerships DROP COLUMN answers;
ALTER TABLE programs DROP COLUMN questions, DROP COLUMN categories, DROP COLUMN terms, DROP COLUMN website;
