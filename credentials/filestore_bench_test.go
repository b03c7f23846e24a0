package credentials

import "testing"

// BenchmarkFileStoreAPIKey is what every tool call pays to read its owner's key from the encrypted key store: a
// stat of the file (unchanged, so not re-read) and one AES-GCM open.
func BenchmarkFileStoreAPIKey(b *testing.B) {
	mk, _ := masterKey(b, hexForm)
	s, err := OpenFileStore(b.TempDir()+"/keys.json", mk)
	if err != nil {
		b.Fatal(err)
	}
	if err := SetAPIKey(s, "alice", testKey); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := APIKey(s, "alice"); err != nil {
			b.Fatal(err)
		}
	}
}
