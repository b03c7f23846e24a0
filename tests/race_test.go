//go:build race

package tests

// raceEnabled: the tests run under -race, so the binary they drive is built with it too.
const raceEnabled = true
