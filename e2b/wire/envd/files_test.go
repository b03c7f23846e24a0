package envd_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// WriteInfo has the members envd.yaml requires, always sent, and reads envd 0.6.13's answer of POST /files with
// no member unknown and writes it back byte for byte.
func TestWriteInfoIsEnvds(t *testing.T) {
	if data, err := json.Marshal(envd.WriteInfo{}); err != nil || string(data) != `{"name":"","path":"","type":""}` {
		t.Errorf("an empty WriteInfo is %s, %v; want envd's required members name, path and type", data, err)
	}
	const answer = `[{"name":"zz.txt","path":"/tmp/zz.txt","type":"file"}]`
	var infos []envd.WriteInfo
	dec := json.NewDecoder(bytes.NewReader([]byte(answer)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&infos); err != nil {
		t.Fatalf("envd's answer does not read: %v", err)
	}
	if again, err := json.Marshal(infos); err != nil || string(again) != answer {
		t.Errorf("envd's answer comes back as %s, %v\n want %s", again, err, answer)
	}
}
