// Package controllers holds the reconcilers of the platform's custom resources, one per file,
// each with an envtest suite.
package controllers
