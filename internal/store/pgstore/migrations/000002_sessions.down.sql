-- Children first: retired tokens point at sessions.
DROP TABLE retired_refresh_tokens;
DROP TABLE sessions;
