package ignition

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/coreos/vcontext/tree"
)

// Problem is one reason a config is refused, addressed by the JSON path of
// the offending value (for example "$.storage.files[2].path").
type Problem struct {
	// Path is the JSON path; "$" is the whole document. Problems returned by
	// an Extra hook may carry another kind of address (a file:line).
	Path    string
	Message string
	// Line and Column locate the value in the (decompressed) config, both
	// counted from 1; zero when unknown.
	Line, Column int

	// offset orders problems in document order; -1 when unknown.
	offset int64
}

// String renders "<path>: <message>", the exact line drover validate and
// drover-agent print.
func (p Problem) String() string {
	return p.Path + ": " + p.Message
}

// Problems is the error returned when a config is refused: every problem,
// in document order.
type Problems []Problem

func (ps Problems) Error() string {
	if len(ps) == 1 {
		return "ignition config refused: " + ps[0].String()
	}
	lines := make([]string, 0, len(ps)+1)
	lines = append(lines, fmt.Sprintf("ignition config refused (%d problems):", len(ps)))
	for _, p := range ps {
		lines = append(lines, "  "+p.String())
	}
	return strings.Join(lines, "\n")
}

// sortProblems puts problems in document order; problems without a position
// (those of an Extra hook) keep their order after all others.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if (a.offset < 0) != (b.offset < 0) {
			return b.offset < 0
		}
		if a.offset != b.offset {
			return a.offset < b.offset
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Message < b.Message
	})
}

// jsonPath renders a vcontext path ("storage", "files", 2, "path") as
// "$.storage.files[2].path".
func jsonPath(elems []any) string {
	var b strings.Builder
	b.WriteString("$")
	for _, e := range elems {
		switch v := e.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(v) + "]")
		case tree.Key:
			b.WriteString("." + string(v))
		default:
			fmt.Fprintf(&b, ".%v", v)
		}
	}
	return b.String()
}

// collector gathers problems and locates each in the JSON source. The tree
// is nil when the document could not be read as JSON.
type collector struct {
	tree tree.Node
	list []Problem
}

// add records a problem at the JSON path given by elems.
func (c *collector) add(msg string, elems ...any) {
	p := Problem{Path: jsonPath(elems), Message: msg, offset: -1}
	if c.tree != nil {
		if pos := locate(c.tree, elems); pos != nil {
			p.Line, p.Column, p.offset = int(pos.Line), int(pos.Column), pos.Index
		}
	}
	c.list = append(c.list, p)
}

func (c *collector) addf(elems []any, format string, args ...any) {
	c.add(fmt.Sprintf(format, args...), elems...)
}

// sub builds a JSON path element list without aliasing the caller's slice,
// so sibling paths built from one prefix never overwrite each other.
func sub(prefix []any, more ...any) []any {
	out := make([]any, 0, len(prefix)+len(more))
	return append(append(out, prefix...), more...)
}

// locate finds the start of the deepest node on the path; a path that goes
// past the document (a missing key) stops at the last node that exists.
func locate(n tree.Node, elems []any) *tree.Pos {
	best := n.GetMarker().StartP
	for _, e := range elems {
		var next tree.Node
		switch node := n.(type) {
		case tree.MapNode:
			switch k := e.(type) {
			case string:
				if c, ok := node.Children[k]; ok {
					next = c
				}
			case tree.Key:
				if l, ok := node.Keys[string(k)]; ok {
					next = l
				}
			}
		case tree.SliceNode:
			if i, ok := e.(int); ok && i >= 0 && i < len(node.Children) {
				next = node.Children[i]
			}
		}
		if next == nil {
			break
		}
		n = next
		if p := n.GetMarker().StartP; p != nil {
			best = p
		}
	}
	return best
}

// pathAt finds the JSON path of the deepest value that covers byte offset
// off; it turns encoding/json's offsets into paths for type errors.
func pathAt(n tree.Node, off int64) []any {
	var elems []any
	for {
		found := false
		switch node := n.(type) {
		case tree.MapNode:
			for k, c := range node.Children {
				if covers(c, off) {
					elems, n, found = append(elems, k), c, true
					break
				}
			}
		case tree.SliceNode:
			for i, c := range node.Children {
				if covers(c, off) {
					elems, n, found = append(elems, i), c, true
					break
				}
			}
		}
		if !found {
			return elems
		}
	}
}

func covers(n tree.Node, off int64) bool {
	m := n.GetMarker()
	return m.StartP != nil && m.EndP != nil && m.StartP.Index <= off && off <= m.EndP.Index
}

// lineColumn turns a byte offset into a 1-based line and column.
func lineColumn(data []byte, off int64) (int, int) {
	line, col := 1, 1
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
