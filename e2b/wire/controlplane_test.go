package wire

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// fields are the members of an answer as E2B's API declares them (docs/e2b.md; E2B's openapi.yml): those always
// sent, those sent only when set, and those always sent but null when unset.
type fields struct{ required, optional, nullable []string }

// The bodies the client and the emulator exchange, each with its declared members and a body in E2B's form that
// sets every one of them. A request's members are all sent only when set: what the client leaves out, E2B (and
// the emulator) takes its default for. A member of E2B's the code does not use (a detail's network, volumeMounts) is
// left out of the types on purpose: it decodes to nothing.
var bodies = []struct {
	name  string
	zero  func() any // a new value of the type to decode into
	f     fields
	whole string
}{
	{"Sandbox", func() any { return new(Sandbox) },
		fields{required: []string{"templateID", "sandboxID", "clientID", "envdVersion"},
			optional: []string{"alias", "envdAccessToken"}, nullable: []string{"trafficAccessToken", "domain"}},
		`{"alias":"web","clientID":"6532622b","domain":"e2b.app","envdAccessToken":"tok","envdVersion":"0.6.13",` +
			`"sandboxID":"i1ab2","templateID":"base","trafficAccessToken":"ttok"}`},
	{"ListedSandbox", func() any { return new(ListedSandbox) },
		fields{required: []string{"templateID", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount", "memoryMB",
			"diskSizeMB", "state", "envdVersion"}, optional: []string{"alias", "metadata"}},
		`{"alias":"web","clientID":"6532622b","cpuCount":2,"diskSizeMB":22528,"endAt":"2026-12-06T05:00:00Z",` +
			`"envdVersion":"0.6.13","memoryMB":512,"metadata":{"owner":"alice"},"sandboxID":"i1ab2",` +
			`"startedAt":"2026-12-06T04:00:00Z","state":"paused","templateID":"base"}`},
	{"SandboxDetail", func() any { return new(SandboxDetail) },
		fields{required: []string{"templateID", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount", "memoryMB",
			"diskSizeMB", "state", "envdVersion"}, optional: []string{"alias", "metadata", "envdAccessToken"},
			nullable: []string{"allowInternetAccess", "domain", "lifecycle"}},
		`{"alias":"web","clientID":"6532622b","cpuCount":2,"diskSizeMB":22528,"endAt":"2026-12-06T05:00:00Z",` +
			`"envdVersion":"0.6.13","memoryMB":512,"metadata":{"owner":"alice"},"sandboxID":"i1ab2",` +
			`"startedAt":"2026-12-06T04:00:00Z","state":"running","templateID":"base","allowInternetAccess":false,` +
			`"domain":"e2b.app","envdAccessToken":"tok","lifecycle":{"autoResume":true,"onTimeout":"pause"}}`},
	{"SnapshotInfo", func() any { return new(SnapshotInfo) },
		fields{required: []string{"snapshotID", "names"}},
		`{"snapshotID":"team-slug/my-snapshot:default","names":["team-slug/my-snapshot:default"]}`},
	{"Error", func() any { return new(Error) },
		fields{required: []string{"code", "message"}, optional: []string{"error_code"}},
		`{"code":409,"message":"Sandbox i1ab2 is already paused","error_code":"conflict"}`},
	{"ForkResult", func() any { return new(ForkResult) },
		fields{optional: []string{"sandbox", "error"}},
		`{"sandbox":{"clientID":"6532622b","domain":null,"envdVersion":"0.6.13","sandboxID":"i1ab3",` +
			`"templateID":"base","trafficAccessToken":null},"error":{"code":500,"message":"no room"}}`},
	{"TimeoutRequest", func() any { return new(TimeoutRequest) }, fields{optional: []string{"timeout"}},
		`{"timeout":300}`},
	{"ConnectV2Request", func() any { return new(ConnectV2Request) },
		fields{optional: []string{"timeout", "memory"}}, `{"timeout":0,"memory":true}`},
	{"PauseRequest", func() any { return new(PauseRequest) }, fields{optional: []string{"memory"}},
		`{"memory":false}`},
	{"SnapshotRequest", func() any { return new(SnapshotRequest) }, fields{optional: []string{"name"}},
		`{"name":"my-snapshot"}`},
	{"ForkRequest", func() any { return new(ForkRequest) }, fields{optional: []string{"timeout", "count"}},
		`{"timeout":60,"count":3}`},
	// metadata and envVars are sent always, as the SDKs send them (null only from a sender that leaves them nil,
	// which the client never does).
	{"NewSandboxV2", func() any { return new(NewSandboxV2) },
		fields{optional: createMembers, nullable: []string{"metadata", "envVars"}}, wholeCreate + `}`},
	{"NewSandbox", func() any { return new(NewSandbox) },
		fields{optional: append(slices.Clone(createMembers), "secure"), nullable: []string{"metadata", "envVars"}},
		wholeCreate + `,"secure":true}`},
	{"AutoResume", func() any { return new(AutoResume) }, fields{required: []string{"enabled"}}, `{"enabled":true}`},
}

// createMembers are create's members sent only when set.
var createMembers = []string{"templateID", "timeout", "autoPause", "autoPauseMemory", "autoResume",
	"allow_internet_access", "network"}

// wholeCreate is a v2 create in E2B's form, every member set, without its closing brace.
const wholeCreate = `{"templateID":"base","timeout":300,"autoPause":true,"autoPauseMemory":false,` +
	`"autoResume":{"enabled":false},"allow_internet_access":false,"metadata":{"owner":"alice"},"envVars":{"X":"1"},` +
	`"network":{"allowOut":["github.com"],"denyOut":["0.0.0.0/0"],"rules":{},"allowPublicTraffic":false}`

// Each body spells E2B's members as E2B does: an empty value carries exactly the members always sent (nullable
// ones as null), and a body in E2B's form that sets every member decodes with none unknown and encodes back to
// itself, so neither end can drop, rename or invent a member, and a zero the client means (a timeout of 0, memory
// false) is sent.
func TestBodiesSpeakE2BsMembers(t *testing.T) {
	for _, a := range bodies {
		t.Run(a.name, func(t *testing.T) {
			empty, err := json.Marshal(a.zero())
			if err != nil {
				t.Fatal(err)
			}
			var members map[string]json.RawMessage
			if err := json.Unmarshal(empty, &members); err != nil {
				t.Fatal(err)
			}
			always := slices.Sorted(slices.Values(append(slices.Clone(a.f.required), a.f.nullable...)))
			if got := slices.Sorted(maps.Keys(members)); !slices.Equal(got, always) {
				t.Errorf("an empty %s has members %v, want those E2B always sends: %v", a.name, got, always)
			}
			for _, n := range a.f.nullable {
				if v, ok := members[n]; ok && string(v) != "null" {
					t.Errorf("an empty %s sends %s as %s, want null", a.name, n, v)
				}
			}

			v := a.zero()
			dec := json.NewDecoder(bytes.NewReader([]byte(a.whole)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("E2B's %s does not decode: %v", a.name, err)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var want, got map[string]json.RawMessage
			if err := json.Unmarshal([]byte(a.whole), &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(again, &got); err != nil {
				t.Fatal(err)
			}
			all := slices.Sorted(slices.Values(append(append(slices.Clone(a.f.required), a.f.optional...),
				a.f.nullable...)))
			if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, all) {
				t.Errorf("a whole %s encodes members %v, want %v", a.name, keys, all)
			}
			if !sameJSON(t, want, got) {
				t.Errorf("%s does not come back as E2B sent it:\n sent  %s\n again %s", a.name, a.whole, again)
			}
		})
	}
}

// sameJSON compares two objects member by member, as values (so that key order and spacing do not count).
func sameJSON(t *testing.T, a, b map[string]json.RawMessage) bool {
	t.Helper()
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		var x, y any
		if json.Unmarshal(av, &x) != nil || json.Unmarshal(b[k], &y) != nil {
			return false
		}
		xs, _ := json.Marshal(x)
		ys, _ := json.Marshal(y)
		if !bytes.Equal(xs, ys) {
			return false
		}
	}
	return true
}
