package tools

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// Arguments bound from the server's decoding are what encoding/json makes of the same JSON, for every argument
// type of the tools; where bindDecoded declines (wrong types, names in another case, numbers json refuses), the
// JSON is parsed instead, so the outcome is the same either way.
func TestBindDecodedMatchesJSON(t *testing.T) {
	inputs := []string{
		`{}`,
		`{"sandbox_id":"sb1","command":"echo hi","cwd":"/tmp","timeout_ms":1500}`,
		`{"sandbox_id":"sb1","command":"x","timeout_ms":1e3}`,
		`{"sandbox_id":"sb1","command":"x","timeout_ms":1.5}`,
		`{"sandbox_id":"sb1","command":"x","timeout_ms":99999999999999999999}`,
		`{"sandbox_id":"sb1","command":"x","timeout_ms":"10"}`,
		`{"sandbox_id":"sb1","command":null,"timeout_ms":null}`,
		`{"Sandbox_ID":"sb1","command":"x"}`,
		`{"sandbox_id":"sb1","path":"/f","content":"line\nmore \u00e9\ud83d\ude00"}`,
		`{"sandbox_id":"sb1","path":"/f","content":null}`,
		`{"sandbox_id":"sb1","path":"/f","content":""}`,
		`{"title":"t","template":"base","timeout_seconds":60,"env_vars":{"A":"1","B":""},"upload_files":[{"session_path":"a","sandbox_path":"b"},{"session_path":"c"}]}`,
		`{"env_vars":{"A":1}}`,
		`{"upload_files":[{"session_path":1}]}`,
		`{"upload_files":{}}`,
		`{"sandbox_id":"sb1","every_steps":0,"on_pause":false,"reset":true}`,
		`{"sandbox_id":"sb1","every_steps":-3,"on_pause":"yes"}`,
		`{"sandbox_id":"sb1","checkpoint_id":"cp","count":3,"title":"f"}`,
		`{"sandbox_id":"sb1","path":"/f","offset":2,"limit":10}`,
		`{"sandbox_id":"sb1","action":"resume","timeout_seconds":120}`,
		`{"unknown":{"deep":[1,2,{"x":null}]}}`,
	}
	types := []any{execArgs{}, writeArgs{}, createArgs{}, checkpointPolicyArgs{}, forkArgs{}, readArgs{}, manageArgs{}}
	for _, in := range inputs {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader([]byte(in)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		for _, typ := range types {
			want := reflect.New(reflect.TypeOf(typ))
			jsonErr := json.Unmarshal([]byte(in), want.Interface())
			got := reflect.New(reflect.TypeOf(typ))
			bound := bindDecoded(m, got.Interface())
			switch {
			case bound && jsonErr != nil:
				t.Errorf("%T from %s: bound, but encoding/json refuses it: %v", typ, in, jsonErr)
			case bound && !reflect.DeepEqual(got.Elem().Interface(), want.Elem().Interface()):
				t.Errorf("%T from %s:\n got %+v\nwant %+v", typ, in, got.Elem().Interface(), want.Elem().Interface())
			}
		}
	}
	// The common calls bind without a second parse.
	for _, c := range []struct {
		in  string
		typ any
	}{
		{`{"sandbox_id":"sb1","command":"echo hi","timeout_ms":1500}`, &execArgs{}},
		{`{"sandbox_id":"sb1","path":"/f","content":"x"}`, &writeArgs{}},
		{`{"title":"t","env_vars":{"A":"1"},"upload_files":[{"session_path":"a"}]}`, &createArgs{}},
		{`{"sandbox_id":"sb1","every_steps":0,"on_pause":false}`, &checkpointPolicyArgs{}},
	} {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader([]byte(c.in)))
		dec.UseNumber()
		_ = dec.Decode(&m)
		if !bindDecoded(m, c.typ) {
			t.Errorf("%T from %s was not bound from the decoded arguments", c.typ, c.in)
		}
	}
}
