// Package docs holds the tests of the repository's documentation: every document a file cites
// is in the repository.
package docs
