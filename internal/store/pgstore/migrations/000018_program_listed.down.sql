ALTER TABLE programs DROP CONSTRAINT programs_public_listed, DROP COLUMN listed;
