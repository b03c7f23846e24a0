//go:build !unix

package tools

// nonBlocking is 0 where opening a file cannot block on a FIFO the way it does on Unix.
const nonBlocking = 0
