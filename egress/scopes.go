package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

// An egress file narrows or widens the server's egress policy (its flags) for one owner, or for one session of an
// owner; the most specific scope wins, field by field:
//
//	owners:
//	  alice:
//	    allow_out: [github.com, "*.npmjs.org"]
//	    credentials: [github]
//	    sessions:
//	      ci:
//	        no_internet: true
//	        credentials: none
//
// A field a scope leaves out keeps the enclosing scope's value; allow_out: [] removes an allow-list.

// Scope is the egress policy of an owner or a session, as far as it differs from the enclosing one.
type Scope struct {
	AllowOut    []string          `yaml:"allow_out"`
	DenyOut     []string          `yaml:"deny_out"`
	NoInternet  *bool             `yaml:"no_internet"`
	Credentials *CredentialChoice `yaml:"credentials"`
}

// OwnerScope is an owner's scope and those of its sessions.
type OwnerScope struct {
	Scope    `yaml:",inline"`
	Sessions map[string]Scope `yaml:"sessions"`
}

// CredentialChoice is which of the owner's credentials sandboxes get: all, none, or the names listed.
type CredentialChoice struct {
	All   bool
	Names []string
}

// UnmarshalYAML reads "all", "none" or a list of names.
func (c *CredentialChoice) UnmarshalYAML(n *yaml.Node) error {
	switch {
	case n.Kind == yaml.ScalarNode && n.Value == "all":
		*c = CredentialChoice{All: true}
	case n.Kind == yaml.ScalarNode && n.Value == "none":
		*c = CredentialChoice{Names: []string{}}
	case n.Kind == yaml.SequenceNode:
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		*c = CredentialChoice{Names: names}
		if names == nil {
			c.Names = []string{}
		}
	default:
		return fmt.Errorf("line %d: credentials must be all, none or a list of names", n.Line)
	}
	return nil
}

// list is the choice as Policy.Credentials takes it: nil for all.
func (c CredentialChoice) list() []string {
	if c.All {
		return nil
	}
	return c.Names
}

// maxEgressFile bounds an egress file; real ones are a few lines per owner.
const maxEgressFile = 1 << 20

// LoadScopes reads an egress file: owners' and sessions' scopes, each checked as the flags are.
func LoadScopes(path string) (map[string]OwnerScope, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("egress file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEgressFile+1))
	if err != nil {
		return nil, fmt.Errorf("egress file %s: %w", path, err)
	}
	if len(data) > maxEgressFile {
		return nil, fmt.Errorf("egress file %s is larger than %d bytes", path, maxEgressFile)
	}
	var file struct {
		Owners map[string]OwnerScope `yaml:"owners"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("egress file %s: %w", path, err)
	}
	for owner, o := range file.Owners {
		if err := credentials.CheckOwner(owner); err != nil {
			return nil, fmt.Errorf("egress file %s: %w", path, err)
		}
		if err := o.Scope.check(); err != nil {
			return nil, fmt.Errorf("egress file %s, owner %s: %w", path, owner, err)
		}
		for session, s := range o.Sessions {
			if err := s.check(); err != nil {
				return nil, fmt.Errorf("egress file %s, owner %s, session %s: %w", path, owner, session, err)
			}
		}
	}
	return file.Owners, nil
}

func (s Scope) check() error {
	return Limits{AllowOut: s.AllowOut, DenyOut: s.DenyOut}.Check()
}

// apply lays s over a policy's limits and credential choice.
func (s Scope) apply(l Limits, creds []string) (Limits, []string) {
	if s.AllowOut != nil {
		l.AllowOut = s.AllowOut
	}
	if s.DenyOut != nil {
		l.DenyOut = s.DenyOut
	}
	if s.NoInternet != nil {
		l.NoInternet = *s.NoInternet
	}
	if s.Credentials != nil {
		creds = s.Credentials.list()
	}
	return l, creds
}

// scoped is the policy's limits and credential choice for one session of an owner.
func (p *Policy) scoped(owner, session string) (Limits, []string) {
	l, creds := p.Limits, p.Credentials
	o, ok := p.Owners[owner]
	if !ok {
		return l, creds
	}
	l, creds = o.Scope.apply(l, creds)
	if s, ok := o.Sessions[session]; ok {
		l, creds = s.apply(l, creds)
	}
	return l, creds
}
