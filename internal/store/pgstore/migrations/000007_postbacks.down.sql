DROP TABLE IF EXISTS company_postbacks;
