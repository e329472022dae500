-- Listed approval programs (docs/programs.md, "Who sees what"): an approval program appears
-- in the affiliates' listing, with "Apply", when its brand chooses so. Public programs are
-- always listed; approval programs that existed before stay unlisted, as they were.
ALTER TABLE programs ADD COLUMN listed boolean NOT NULL DEFAULT false;
UPDATE programs SET listed = true WHERE visibility = 'public';
ALTER TABLE programs ADD CONSTRAINT programs_public_listed CHECK (visibility <> 'public' OR listed);
