// Package auth holds the platform's credentials: API keys now; sessions and sign-in come
// with the identity work.
package auth
