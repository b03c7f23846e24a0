package policy

// TestToolList is the catalogue the package's tests use, for the external test that checks it against the tools.
var TestToolList = testToolList
