DROP TABLE IF EXISTS affiliate_invitations;
DROP TABLE IF EXISTS team_invitations;
