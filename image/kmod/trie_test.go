package kmod

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestTrieLayout pins the byte layout on two tries small enough to work out
// by hand from the format: kmod 34's pre-order (a node, then its children's
// subtrees in character order), big-endian offsets carrying the flag
// nibble, first/last child bytes, NUL-terminated strings.
func TestTrieLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		ins  [][3]string // key, value, priority
		want string
	}{{
		name: "one key",
		ins:  [][3]string{{"a", "x", "1"}},
		want: "b007f457" + "00020001" + "2000000c" +
			// offset 12: root, children 'a'..'a' → 0x40000012
			"6161" + "40000012" +
			// offset 18: leaf, values only: 1 value, priority 1, "x"
			"00000001" + "00000001" + "7800",
	}, {
		name: "split prefix",
		ins:  [][3]string{{"one", "2", "0"}, {"on", "1", "0"}},
		want: "b007f457" + "00020001" + "2000000c" +
			// offset 12: root, child 'o' → 0xe0000012 (prefix|values|children)
			"6f6f" + "e0000012" +
			// offset 18: node "on": prefix "n", child 'e' → 0x40000024, value "1"
			"6e00" + "6565" + "40000024" + "00000001" + "00000000" + "3100" +
			// offset 36: leaf "one" (empty prefix), value "2"
			"00000001" + "00000000" + "3200",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &trie{}
			for _, in := range tc.ins {
				var prio uint32
				fmt.Sscan(in[2], &prio)
				if err := tr.insert(in[0], in[1], prio); err != nil {
					t.Fatal(err)
				}
			}
			if got := hex.EncodeToString(tr.bytes()); got != tc.want {
				t.Errorf("bytes:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestTrieRoundTrip inserts random keys (many sharing prefixes, some keys
// prefixes of others, several values per key) and reads them back with the
// independent decoder.
func TestTrieRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "ab-_:*[]0z"
	want := map[string][]trieValue{}
	tr := &trie{}
	for i := range 2000 {
		n := 1 + rng.IntN(8)
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		key := b.String()
		v := trieValue{priority: uint32(rng.IntN(4)), value: fmt.Sprintf("v%d", i)}
		if err := tr.insert(key, v.value, v.priority); err != nil {
			t.Fatal(err)
		}
		// Expected order: by priority; a new value goes before older ones
		// of the same priority.
		vals := want[key]
		at := 0
		for at < len(vals) && vals[at].priority < v.priority {
			at++
		}
		want[key] = slices.Insert(vals, at, v)
	}
	got, err := decodeIndex(tr.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		for k, v := range want {
			if !reflect.DeepEqual(got[k], v) {
				t.Errorf("key %q: got %v, want %v", k, got[k], v)
			}
		}
		t.Fatalf("decoded %d keys, want %d", len(got), len(want))
	}
}

func TestTrieEmptyAndEmptyKey(t *testing.T) {
	tr := &trie{}
	if got, err := decodeIndex(tr.bytes()); err != nil || len(got) != 0 {
		t.Errorf("empty trie decodes to %v, %v", got, err)
	}
	tr.insert("", "root value", 0)
	got, err := decodeIndex(tr.bytes())
	if err != nil || !reflect.DeepEqual(got, map[string][]trieValue{"": {{0, "root value"}}}) {
		t.Errorf("decoded %v, %v", got, err)
	}
}

func TestTrieRejectsNonASCII(t *testing.T) {
	tr := &trie{}
	if err := tr.insert("caf\xc3\xa9", "x", 0); err == nil || !strings.Contains(err.Error(), "7-bit") {
		t.Errorf("insert of a non-ASCII key: %v", err)
	}
	if err := tr.insert("k", "\xff", 0); err == nil {
		t.Error("insert of a non-ASCII value succeeded")
	}
}
