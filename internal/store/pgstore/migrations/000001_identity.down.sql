-- Children first: their foreign keys point at companies.
DROP TABLE api_keys;
DROP TABLE users;
DROP TABLE companies;
