// Package session keeps the dashboard's sign-in sessions.
//
// A session is a row in Postgres (table sessions) and two tokens:
//
//   - an access token: a JWT signed HS256 with a key id (kid) in its header, valid for
//     Options.AccessTTL (15 min), carrying the user, company, company kind, role, locale and
//     session id. Verifying it checks the signature and claims, then looks the session up by
//     primary key, so a sign-out takes effect at once;
//   - a refresh token: 32 random bytes, of which only the SHA-256 is stored. Each refresh
//     retires it and hands out a new one. A retired token presented again means someone else
//     holds a copy, and the session is revoked, except within a few seconds of its rotation,
//     when it is two browser tabs refreshing at once (the late one gets an access token only).
//
// A session ends Options.RefreshTTL (30 days) after sign-in, on sign-out, or when revoked.
//
// Browsers carry the tokens in cookies (SetCookies): HttpOnly access and refresh cookies, and
// a CSRF cookie that the dashboard's JavaScript copies into the X-CSRF-Token header of every
// request that changes state. The CSRF token is an HMAC of the session id, so it needs no
// storage. Other clients send the access token as Authorization: Bearer and need no CSRF token.
//
// # Rotating the signing key
//
// The key spec lists keys "kid:<base64>,..."; the first signs, all verify. To rotate without
// signing anybody out:
//
//  1. append the new key to the spec on every replica (it verifies, does not sign yet);
//  2. move it to the front (it signs; tokens under the old key still verify);
//  3. after at least the access-token lifetime, drop the old key: by then every active client
//     has refreshed, which gives it an access token and a CSRF token under the new key.
//
// For a leaked key, drop it at once: every client then has to refresh (their refresh tokens do
// not depend on the key), and cookie clients get a new CSRF token with the refresh.
package session
