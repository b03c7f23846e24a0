package e2b

import "strings"

// minSecretRun is the shortest piece of a secret that scrub hides. A secret is hidden not only whole: a message cut
// to a length can end inside one, and code in a sandbox that holds one can print it in pieces. A piece of eight
// characters of a random token does not occur in other text by chance, and a shorter one gives an attacker
// little.
const minSecretRun = 8

// scrub replaces every run of at least minSecretRun characters of s that is a piece of one of secrets (a
// substring of it, the whole included) by "[redacted]". Empty secrets are ignored.
func scrub(s string, secrets ...string) string {
	for _, secret := range secrets {
		if len(secret) < minSecretRun || len(s) < minSecretRun {
			continue
		}
		s = scrubOne(s, secret)
	}
	return s
}

func scrubOne(s, secret string) string {
	var b strings.Builder
	done := 0 // s[:done] is written or dropped
	for i := 0; i+minSecretRun <= len(s); {
		at := strings.Index(secret, s[i:i+minSecretRun])
		if at < 0 {
			i++
			continue
		}
		// Extend the piece as far as it goes on matching the secret, from every place the secret holds it.
		end := i + minSecretRun
		for j := at; j >= 0; {
			k := i
			for k < len(s) && j+(k-i) < len(secret) && s[k] == secret[j+(k-i)] {
				k++
			}
			end = max(end, k)
			next := strings.Index(secret[j+1:], s[i:i+minSecretRun])
			if next < 0 {
				break
			}
			j += 1 + next
		}
		if b.Len() == 0 && done == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[done:i])
		b.WriteString("[redacted]")
		done, i = end, end
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}
