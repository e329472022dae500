package conversions

// Duplicates are the duplicate reads of registration, for the plan test.
var Duplicates = duplicates
