DROP TABLE oauth_states;
