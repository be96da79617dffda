package ecsmeta

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"time"
)

// STSCredentials are one issue of the RAM role's temporary credentials, as
// the metadata service answers them and as a verifier (harness/acrapi)
// looks them up by AccessKeyId.
type STSCredentials struct {
	Role            string
	AccessKeyID     string
	AccessKeySecret string
	SecurityToken   string
	Issued          time.Time
	Expiration      time.Time
}

// DefaultSTSLifetime is how long issued credentials are valid; the
// emulator rotates them halfway, so a client always sees some with time
// left (ECS rotates before expiry).
const DefaultSTSLifetime = time.Hour

// stsJSON is the answer to meta-data/ram/security-credentials/<role>: the
// fields ECS documents (credentials-go reads the same names).
type stsJSON struct {
	AccessKeyID     string `json:"AccessKeyId"`
	AccessKeySecret string `json:"AccessKeySecret"`
	Expiration      string `json:"Expiration"`
	SecurityToken   string `json:"SecurityToken"`
	LastUpdated     string `json:"LastUpdated"`
	Code            string `json:"Code"`
}

// stsTime is the format ECS writes Expiration and LastUpdated in.
const stsTime = "2006-01-02T15:04:05Z"

func (s *Server) stsLifetime() time.Duration {
	if s.opts.STSLifetime > 0 {
		return s.opts.STSLifetime
	}
	return DefaultSTSLifetime
}

// roleCredentials returns the role's current credentials, issuing new ones
// when there are none for it or half their life is gone. Every issue is
// kept for RoleCredentials: a client may present one after a rotation.
func (s *Server) roleCredentials(role string, now time.Time) STSCredentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.current[role]
	life := s.stsLifetime()
	if ok && now.Before(cur.Issued.Add(life/2)) {
		return cur
	}
	c := STSCredentials{Role: role, AccessKeyID: "STS." + randomHex(12), AccessKeySecret: randomHex(20),
		SecurityToken: "CAIS" + randomHex(48), Issued: now.UTC().Truncate(time.Second)}
	c.Expiration = c.Issued.Add(life)
	if s.current == nil {
		s.current = map[string]STSCredentials{}
		s.issued = map[string]STSCredentials{}
	}
	s.current[role] = c
	s.issued[c.AccessKeyID] = c
	s.stats.STSIssued++
	return c
}

// RoleCredentials looks up credentials this server issued, by AccessKeyId
// (expired ones too: the verifier decides what expiry means).
func (s *Server) RoleCredentials(accessKeyID string) (STSCredentials, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.issued[accessKeyID]
	return c, ok
}

// IssuedCredentials are every credential issued so far, oldest first.
func (s *Server) IssuedCredentials() []STSCredentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []STSCredentials
	for _, c := range s.issued {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b STSCredentials) int { return a.Issued.Compare(b.Issued) })
	return out
}

// DetachRAMRole removes the instance's role, as ECS DetachInstanceRamRole
// does: the metadata no longer lists or answers it. Credentials issued
// before stay valid until they expire, as STS tokens do.
func (s *Server) DetachRAMRole() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inst.RAMRole = ""
}

// serveRole answers the role's key with its current credentials.
func (s *Server) serveRole(w http.ResponseWriter, role string) {
	c := s.roleCredentials(role, s.now())
	body, _ := json.MarshalIndent(stsJSON{AccessKeyID: c.AccessKeyID, AccessKeySecret: c.AccessKeySecret,
		Expiration: c.Expiration.Format(stsTime), SecurityToken: c.SecurityToken, LastUpdated: c.Issued.Format(stsTime),
		Code: "Success"}, "", "  ") // strings only: never fails
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, string(body))
}

// roleKey says whether p is the meta-data key of inst's role.
func roleKey(inst Instance, p string) bool {
	return inst.RAMRole != "" && p == "/latest/meta-data/"+RAMCredentialsKey+inst.RAMRole
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
