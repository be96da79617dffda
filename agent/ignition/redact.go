package ignition

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/vincent-petithory/dataurl"

	"github.com/drover-os/drover/internal/gunzip"
)

// Redaction is what Redact did to a config.
type Redaction struct {
	Config  []byte // the redacted config
	Changed bool   // the secret was found somewhere
	// Dropped are the verification hashes of remote contents whose stored
	// copy held the secret: the config now carries them inline, redacted,
	// and the caller deletes the stored copies.
	Dropped []string
}

// Redact replaces every occurrence of secret in the config raw by
// replacement: in plain strings (unit contents, drop-ins) and inside
// resources (file contents and append fragments) — a data: URL is decoded
// (and gunzipped) and written back as a plain base64 data: URL; a remote
// resource whose copy in cache holds the secret is inlined the same way,
// since its hash can no longer match. Resources without the secret are left
// as they were. Any Ignition 3.x version is redacted in place (the version
// is kept): only values change, never the structure. raw is read as Parse
// reads it (gzip-compressed once, or not), and a redacted config is
// written as plain JSON: the agent stores the user-data as given.
func Redact(raw []byte, secret, replacement string, cache ContentCache) (Redaction, error) {
	if secret == "" {
		return Redaction{}, fmt.Errorf("redacting the config: no secret given")
	}
	plain, err := decodeUserData(raw)
	if err != nil {
		return Redaction{}, fmt.Errorf("redacting the config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber() // modes and sizes stay exactly as written
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return Redaction{}, fmt.Errorf("redacting the config: %w", err)
	}
	r := &redactor{secret: secret, repl: replacement, cache: cache, budget: newBudget()}
	doc = r.value(doc)
	if r.budget.Out() {
		// Resources past the budget were not searched: the secret may
		// be in them, so nothing is called redacted.
		return Redaction{}, fmt.Errorf("redacting the config: %w", errOverBudget)
	}
	if !r.changed {
		return Redaction{Config: raw}, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return Redaction{}, fmt.Errorf("redacting the config: %w", err)
	}
	return Redaction{Config: b.Bytes(), Changed: true, Dropped: r.dropped}, nil
}

type redactor struct {
	secret, repl string
	cache        ContentCache
	budget       *gunzip.Budget // the same total Parse allows
	changed      bool
	dropped      []string
}

func (r *redactor) value(v any) any {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, r.secret) {
			r.changed = true
			return strings.ReplaceAll(x, r.secret, r.repl)
		}
		return x
	case []any:
		for i := range x {
			x[i] = r.value(x[i])
		}
		return x
	case map[string]any:
		if src, ok := x["source"].(string); ok {
			r.resource(x, src)
		}
		for k, e := range x {
			if k == "source" {
				continue // resource() has handled it
			}
			x[k] = r.value(e)
		}
		return x
	}
	return v
}

// resource redacts one Ignition resource ({source, compression,
// verification}) whose data holds the secret.
func (r *redactor) resource(res map[string]any, src string) {
	u, err := url.Parse(src)
	if err != nil {
		return // not a resource the agent could apply either
	}
	gz := res["compression"] == "gzip"
	var data []byte
	hash := ""
	switch u.Scheme {
	case "data":
		du, err := dataurl.DecodeString(src)
		if err != nil {
			return
		}
		data = du.Data
	case "http", "https":
		v, _ := res["verification"].(map[string]any)
		hash, _ = v["hash"].(string)
		if hash == "" || r.cache == nil {
			return
		}
		stored, ok := r.cache.Load(hash)
		if !ok {
			return // not fetched: nothing of it is on the node
		}
		data = stored
	default:
		return
	}
	if gz {
		var err error
		if data, err = gunzip.Bytes(data, maxFileSize, r.budget); err != nil {
			return // not a resource the agent could apply either
		}
	} else if err := r.budget.Take(int64(len(data))); err != nil {
		return
	}
	if !bytes.Contains(data, []byte(r.secret)) {
		return
	}
	data = bytes.ReplaceAll(data, []byte(r.secret), []byte(r.repl))
	res["source"] = "data:;base64," + base64.StdEncoding.EncodeToString(data)
	// The hash (of the original, compressed bytes) can no longer match,
	// and the data is stored uncompressed.
	delete(res, "compression")
	delete(res, "verification")
	if hash != "" {
		r.dropped = append(r.dropped, strings.ToLower(hash))
	}
	r.changed = true
}
