DROP TABLE magic_codes;
