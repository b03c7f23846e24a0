package envd

// The bodies of envd's HTTP API (spec/envd.yaml) beside its Connect services.

// WriteInfo is one entry of the answer of POST /files: a file written (envd.yaml's EntryInfo, whose generated
// struct orders its members by name). envd adds a metadata member when the upload set X-Metadata-* headers, which
// neither end here does: it is left out of the type.
type WriteInfo struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Type is "file".
	Type string `json:"type"`
}
