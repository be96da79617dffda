package ignition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/coreos/go-semver/semver"
	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	vjson "github.com/coreos/vcontext/json"
	"github.com/coreos/vcontext/report"
	"github.com/coreos/vcontext/tree"

	"github.com/drover-os/drover/internal/gunzip"
)

// maxConfigSize bounds decompressed user-data; ECS user-data is at most
// 32 KiB, so anything near this is a compression bomb, not a config.
const maxConfigSize = 16 << 20

// Spec is the newest stable Ignition spec, the one of the v3_5 package
// used here; configs of every older 3.x spec are translated up to it.
const Spec = "3.5.0"

// supported names the accepted specs in refusals.
const supported = "the stable Ignition specs 3.0.0 to " + Spec

// Config is a parsed config that passed the policy: the user-data translated
// to spec 3.5.0 plus the contents of every file that could be resolved
// without the network.
type Config struct {
	// Version is the spec the user-data declared, e.g. "3.2.0".
	Version string
	// Ignition is the config translated to the newest stable spec.
	Ignition types.Config

	raw    []byte
	tree   tree.Node
	files  []fileContents // one per Ignition.Storage.Files entry
	budget *gunzip.Budget // what the contents may still decode to
}

// Parse reads user-data (raw JSON, or JSON compressed once with gzip) of any
// stable 3.x spec and enforces the drover policy. It returns Problems listing every
// reason for a refusal. File contents given as data: URLs are decoded and
// verified here; http(s) contents are fetched by Resolve.
func Parse(data []byte) (*Config, error) {
	cfg, ps := parse(data)
	if len(ps) > 0 {
		sortProblems(ps)
		return nil, Problems(ps)
	}
	return cfg, nil
}

// parse is the one code path behind Parse, Validate and the agent. It
// returns a Config whenever the document could be read as a config at all,
// even with problems, so that Validate can still run the Extra checks.
func parse(data []byte) (*Config, []Problem) {
	c := &collector{}
	raw, ok := decompress(data, c)
	if !ok {
		return nil, c.list
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		jsonProblem(raw, err, c)
		return nil, c.list
	}
	if _, isObject := doc.(map[string]any); !isObject {
		c.add(fmt.Sprintf("the config is a JSON %s, not an object; the user-data must be an Ignition config — start from {\"ignition\": {\"version\": %q}}", jsonKind(doc), Spec))
		return nil, c.list
	}
	t, err := vjson.UnmarshalToContext(raw)
	if err != nil {
		c.add(fmt.Sprintf("reading the config as JSON: %v", err))
		return nil, c.list
	}
	c.tree = t

	// Type errors are found here, with encoding/json's offset, because
	// Ignition reports them without a JSON path.
	var typed types.Config
	if err := json.Unmarshal(raw, &typed); err != nil {
		jsonProblem(raw, err, c)
		return nil, c.list
	}
	version, ok := checkVersion(typed.Ignition.Version, c)
	if !ok {
		return nil, c.list
	}

	cfg := &Config{Version: version, raw: raw, tree: t}
	parsed, rpt, err := v35.ParseCompatibleVersion(raw)
	reportProblems(rpt, version, c)
	switch {
	case err == nil:
		cfg.Ignition = parsed
	case errors.Is(err, ignerrors.ErrInvalid) && len(rpt.Entries) > 0:
		// Ignition refuses to translate an invalid config, yet the policy
		// should still speak: every 3.x spec decodes into the 3.5 types
		// with the same meaning (later specs only add fields).
		cfg.Ignition = typed
	default:
		c.add(fmt.Sprintf("parsing the config: %v", err))
		return nil, c.list
	}
	checkPolicy(cfg.Ignition, c)
	cfg.budget = newBudget()
	cfg.files = decodeLocal(cfg.Ignition.Storage.Files, cfg.budget, c)
	chargeUnits(cfg.Ignition.Systemd.Units, cfg.budget, c)
	cfg.dropIfOverBudget()
	checkKubeletDropins(cfg, c)
	return cfg, c.list
}

// decompress unwraps gzip-compressed user-data (ECS passes user-data
// through as given, and gzip keeps larger configs under its 32 KiB limit).
func decompress(data []byte, c *collector) ([]byte, bool) {
	if len(bytes.TrimSpace(data)) == 0 {
		c.add(fmt.Sprintf("the user-data is empty; a drover node needs an Ignition config — give at least {\"ignition\": {\"version\": %q}}", Spec))
		return nil, false
	}
	raw, err := decodeUserData(data)
	if err != nil {
		c.add(err.Error())
		return nil, false
	}
	return raw, true
}

// decodeUserData is the one place user-data's encoding is undone, for
// Parse (drover validate and the agent alike) and Redact: the providers
// hand the user-data over as given, so every reader of it sees the same
// bytes and the same verdict. One layer of gzip is accepted; gzip inside
// gzip is refused rather than unwrapped again, so that what a config is
// does not depend on how many times a reader is willing to decompress.
func decodeUserData(data []byte) ([]byte, error) {
	if !isGzip(data) {
		return data, nil
	}
	out, err := gunzip.Bytes(data, maxConfigSize, nil)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the user-data is gzip-compressed but does not decompress: %v — compress the config with gzip again", err)
	case isGzip(out):
		return nil, errors.New("the user-data is compressed twice (gzip inside gzip); drover reads one layer of gzip, on a build host as on the node — compress it once")
	}
	return out, nil
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// jsonProblem reports a syntax error with its line and column and a type
// error with the JSON path of the offending value.
func jsonProblem(raw []byte, err error, c *collector) {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off := max(syn.Offset-1, 0)
		line, col := lineColumn(raw, off)
		c.list = append(c.list, Problem{Path: "$", Line: line, Column: col, offset: off,
			Message: fmt.Sprintf("invalid JSON at line %d, column %d: %s", line, col, syn.Error())})
	case errors.As(err, &typ):
		elems := pathAt(c.tree, max(typ.Offset-1, 0))
		hint := "fix the value"
		if len(elems) > 0 && elems[len(elems)-1] == "mode" {
			hint = "write the mode as a decimal number, e.g. 420 for 0644"
		}
		c.add(fmt.Sprintf("is %s, but must be %s — %s", jsonValueKind(typ.Value), goKind(typ.Type), hint), elems...)
	default:
		c.add(fmt.Sprintf("reading the config as JSON: %v", err))
	}
}

// checkVersion accepts exactly the stable 3.x specs; the experimental spec
// changes without notice, so a node built today could not promise to read
// it the same way tomorrow.
func checkVersion(v string, c *collector) (string, bool) {
	at := []any{"ignition", "version"}
	if v == "" {
		c.addf(at, "missing; drover accepts %s — set it to %q", supported, Spec)
		return "", false
	}
	sv, err := semver.NewVersion(v)
	switch {
	case err != nil:
		c.addf(at, "%q is not a version; drover accepts %s — set it to %q", v, supported, Spec)
	case sv.PreRelease != "":
		c.addf(at, "%q is an experimental spec; drover accepts only %s — set it to %q and drop experimental fields", v, supported, Spec)
	case sv.Major == 2 || sv.Major == 1:
		c.addf(at, "%q is an Ignition spec %d config; drover accepts %s — translate it to spec 3 (for example with ign-converter) and set the version to %q", v, sv.Major, supported, Spec)
	case sv.Major != 3 || sv.Minor > types.MaxVersion.Minor || sv.Patch != 0 || sv.Metadata != "":
		c.addf(at, "%q is not a released Ignition spec; drover accepts %s — set it to %q", v, supported, Spec)
	default:
		return sv.String(), true
	}
	return "", false
}

// reportProblems turns Ignition's report into problems. Errors are kept as
// Ignition words them. Of the warnings, an unknown key is refused: Ignition
// would ignore it, which turns a misspelt "systemd" into a node silently
// missing its units.
func reportProblems(rpt report.Report, version string, c *collector) {
	for _, e := range rpt.Entries {
		elems := e.Context.Path
		switch {
		case e.Kind == report.Error:
			c.add(e.Message, elems...)
		case e.Kind == report.Warn && len(elems) > 0 && isKey(elems[len(elems)-1]):
			key := string(elems[len(elems)-1].(tree.Key))
			c.addf(elems, "unknown key %q in spec %s; Ignition would ignore it and silently drop that configuration — fix the spelling or remove it", key, version)
		}
	}
}

func isKey(e any) bool {
	_, ok := e.(tree.Key)
	return ok
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "object"
}

// jsonValueKind names encoding/json's description of a value ("number 1.5"
// becomes "a number").
func jsonValueKind(v string) string {
	v, _, _ = strings.Cut(v, " ")
	switch v {
	case "array", "object":
		return "an " + v
	case "bool":
		return "a boolean"
	case "":
		return "a value"
	}
	return "a " + v
}

func goKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
