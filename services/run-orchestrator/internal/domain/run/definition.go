package run

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Block is one block of a pinned definition.
type Block struct {
	ID     string         `json:"block_id"`
	Type   string         `json:"type"`
	Params map[string]any `json:"params"`
}

// Edge connects a source block to a target; Branch ("true"/"false") is set on condition edges.
type Edge struct {
	From   string `json:"block_id"`
	To     string `json:"target_block_id"`
	Branch string `json:"branch,omitempty"`
}

// Definition is the workflow graph pinned into a run at dispatch.
type Definition struct {
	Blocks []Block `json:"blocks"`
	Edges  []Edge  `json:"edges"`
	// Indexes built by ParseDefinition: the interpreter asks for a block's incoming edges for
	// every pending block on every step, which a scan of all edges makes quadratic.
	byID     map[string]int
	incoming map[string][]Edge
	outgoing map[string][]string
}

// ParseDefinition reads a definition's JSON form. Numbers stay json.Number so
// that the definition round-trips unchanged.
func ParseDefinition(raw []byte) (Definition, error) {
	var d Definition
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return Definition{}, fmt.Errorf("parse definition: %w", err)
	}
	seen := map[string]bool{}
	for i := range d.Blocks {
		if d.Blocks[i].Params == nil {
			d.Blocks[i].Params = map[string]any{}
		}
		if d.Blocks[i].ID == "" || seen[d.Blocks[i].ID] {
			return Definition{}, fmt.Errorf("parse definition: block %d has an empty or duplicate id", i)
		}
		seen[d.Blocks[i].ID] = true
	}
	d.byID = make(map[string]int, len(d.Blocks))
	for i, b := range d.Blocks {
		d.byID[b.ID] = i
	}
	d.incoming = make(map[string][]Edge, len(d.Blocks))
	d.outgoing = make(map[string][]string, len(d.Blocks))
	for _, e := range d.Edges {
		if !seen[e.From] || !seen[e.To] {
			return Definition{}, fmt.Errorf("parse definition: edge %s -> %s names a missing block", e.From, e.To)
		}
		d.incoming[e.To] = append(d.incoming[e.To], e)
		d.outgoing[e.From] = append(d.outgoing[e.From], e.To)
	}
	return d, nil
}

// Block returns the block with id.
func (d Definition) Block(id string) (Block, bool) {
	if d.byID != nil {
		i, ok := d.byID[id]
		if !ok {
			return Block{}, false
		}
		return d.Blocks[i], true
	}
	for _, b := range d.Blocks {
		if b.ID == id {
			return b, true
		}
	}
	return Block{}, false
}

// Incoming lists the edges that end at id.
func (d Definition) Incoming(id string) []Edge {
	if d.incoming != nil {
		return d.incoming[id]
	}
	var out []Edge
	for _, e := range d.Edges {
		if e.To == id {
			out = append(out, e)
		}
	}
	return out
}

// Sinks lists the blocks without outgoing edges, in definition order.
func (d Definition) Sinks() []string {
	hasOut := map[string]bool{}
	for _, e := range d.Edges {
		hasOut[e.From] = true
	}
	var out []string
	for _, b := range d.Blocks {
		if !hasOut[b.ID] {
			out = append(out, b.ID)
		}
	}
	return out
}

// order lists the blocks s has an entry for, in definition order (so that what the
// interpreter does for several blocks does not depend on map order).
func (d Definition) order(s State) []string {
	out := make([]string, 0, len(s.Blocks))
	for _, b := range d.Blocks {
		if _, ok := s.Blocks[b.ID]; ok {
			out = append(out, b.ID)
		}
	}
	return out
}
