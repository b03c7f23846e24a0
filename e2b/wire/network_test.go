package wire

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

func sample() *Network {
	public := false
	return &Network{
		AllowOut: []string{"github.com", "10.0.0.0/8"},
		DenyOut:  []string{AllTraffic},
		Rules: map[string][]NetworkRule{
			"github.com":  {{Transform: NetworkTransform{Headers: map[string]string{"Authorization": "Basic c2VjcmV0"}}}},
			"*.npmjs.org": {{Transform: NetworkTransform{Headers: map[string]string{"Authorization": "Bearer t", "X-Empty": ""}}}},
		},
		AllowPublicTraffic: &public,
	}
}

// A clone shares nothing with its original: changing either leaves the other as it was.
func TestCloneIsDeep(t *testing.T) {
	if (*Network)(nil).Clone() != nil {
		t.Error("the clone of nil is not nil")
	}
	orig := sample()
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("clone %+v differs from %+v", c, orig)
	}
	c.AllowOut[0] = "changed"
	c.DenyOut[0] = "changed"
	c.Rules["github.com"][0].Transform.Headers["Authorization"] = "changed"
	c.Rules["new.example"] = nil
	*c.AllowPublicTraffic = true
	if !reflect.DeepEqual(orig, sample()) {
		t.Errorf("changing the clone changed the original: %+v", orig)
	}
}

// The JSON is E2B's: its field names, every list and map present, allowPublicTraffic only when set.
func TestNetworkJSON(t *testing.T) {
	data, err := json.Marshal(&Network{AllowOut: []string{}, DenyOut: []string{}, Rules: map[string][]NetworkRule{}})
	if err != nil || string(data) != `{"allowOut":[],"denyOut":[],"rules":{}}` {
		t.Errorf("empty network: %s, %v", data, err)
	}
	data, err = json.Marshal(sample())
	want := `{"allowOut":["github.com","10.0.0.0/8"],"denyOut":["0.0.0.0/0"],"rules":{` +
		`"*.npmjs.org":[{"transform":{"headers":{"Authorization":"Bearer t","X-Empty":""}}}],` +
		`"github.com":[{"transform":{"headers":{"Authorization":"Basic c2VjcmV0"}}}]},"allowPublicTraffic":false}`
	if err != nil || string(data) != want {
		t.Errorf("network: %s, %v\nwant %s", data, err, want)
	}
}

func TestEmptyAndHeaderValues(t *testing.T) {
	for _, n := range []*Network{nil, {}, {AllowPublicTraffic: new(bool)}} {
		if !n.Empty() || n.HeaderValues() != nil {
			t.Errorf("%+v: Empty %v, HeaderValues %q; want true and none", n, n.Empty(), n.HeaderValues())
		}
	}
	n := sample()
	got := n.HeaderValues()
	slices.Sort(got)
	if n.Empty() || !slices.Equal(got, []string{"Basic c2VjcmV0", "Bearer t"}) {
		t.Errorf("Empty %v, HeaderValues %q", n.Empty(), got)
	}
}
