package jsonrpc

import "testing"

// argumentsAt finds the arguments that encoding/json decodes from a message, or says it cannot tell them apart.
func TestArgumentsAt(t *testing.T) {
	for _, c := range []struct{ line, want string }{ // want "" for not found
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}`, `{"a":1}`},
		{` { "params" : { "arguments" : { "a" : "}\\" } , "name" : "x" } , "id" : 1 } `, `{ "a" : "}\\" }`},
		{`{"params":{"name":"{\"arguments\":{}}","_meta":{"arguments":{"b":2}},"arguments":{"a":[1,"]",{}]}}}`,
			`{"a":[1,"]",{}]}`},
		{`{"params":{"n":-1.5e+3,"t":true,"arguments":{"a":null},"f":false}}`, `{"a":null}`},
		{`{"params":{"arguments":"text"}}`, `"text"`},
		{`{"params":{"arguments":7}}`, `7`},
		{`{"params":{"name":"x"}}`, ""},
		{`{"params":{"arguments":{"a":1},"arguments":{"a":2}}}`, ""},
		{`{"params":{"arguments":{"a":1},"ARGUMENTS":{"a":2}}}`, ""},
		{`{"params":{"argument\u0073":{"a":2}}}`, ""},
		{`{"params":{"arguments":{"a":1},"argumentſ":{"a":2}}}`, ""},
		{`{"params":{"arguments":{"a":1}},"PARAMS":{"arguments":{"a":2}}}`, ""},
		{`{"params":{"arguments":{"a":1}},"params":{"arguments":{"a":2}}}`, ""},
		{`{"params":[{"arguments":{"a":1}}]}`, ""},
		{`{"id":{"params":{"arguments":{}}}}`, ""},
	} {
		start, end, found := argumentsAt([]byte(c.line))
		got := ""
		if found {
			got = c.line[start:end]
		}
		if got != c.want {
			t.Errorf("%s: found %q, want %q", c.line, got, c.want)
		}
	}
}
