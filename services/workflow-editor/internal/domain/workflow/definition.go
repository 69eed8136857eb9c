package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Block is one step of a workflow: an instance of a registered block type with its params.
type Block struct {
	ID     string
	Type   string
	Params map[string]any
}

// Edge connects From to To; Branch is "true" or "false" for edges leaving a condition, else "".
type Edge struct {
	From   string
	To     string
	Branch string
}

// Definition is a workflow's graph. Blocks keep the order they were added in; params values
// are JSON values as decoded with UseNumber (numbers are json.Number), so that a definition
// survives any number of round trips through JSON unchanged.
type Definition struct {
	Blocks []Block
	Edges  []Edge
}

// The definition's JSON form (docs/API.md), which is also how it is stored.
type definitionJSON struct {
	Blocks []blockJSON `json:"blocks"`
	Edges  []edgeJSON  `json:"edges"`
}

type blockJSON struct {
	BlockID string         `json:"block_id"`
	Type    string         `json:"type"`
	Params  map[string]any `json:"params"`
}

type edgeJSON struct {
	BlockID       string `json:"block_id"`
	TargetBlockID string `json:"target_block_id"`
	Branch        string `json:"branch,omitempty"`
}

// MarshalJSON writes {"blocks":[...],"edges":[...]}, with params always an object.
func (d Definition) MarshalJSON() ([]byte, error) {
	out := definitionJSON{Blocks: make([]blockJSON, len(d.Blocks)), Edges: make([]edgeJSON, len(d.Edges))}
	for i, b := range d.Blocks {
		params := b.Params
		if params == nil {
			params = map[string]any{}
		}
		out.Blocks[i] = blockJSON{BlockID: b.ID, Type: b.Type, Params: params}
	}
	for i, e := range d.Edges {
		out.Edges[i] = edgeJSON{BlockID: e.From, TargetBlockID: e.To, Branch: e.Branch}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// ParseDefinition reads a definition this package wrote (a stored one). It does not check the
// graph: stored definitions were built by Apply, which keeps it sound.
func ParseDefinition(raw []byte) (Definition, error) {
	var in definitionJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return Definition{}, fmt.Errorf("parse definition: %w", err)
	}
	d := Definition{Blocks: make([]Block, len(in.Blocks)), Edges: make([]Edge, len(in.Edges))}
	for i, b := range in.Blocks {
		params := b.Params
		if params == nil {
			params = map[string]any{}
		}
		d.Blocks[i] = Block{ID: b.BlockID, Type: b.Type, Params: params}
	}
	for i, e := range in.Edges {
		d.Edges[i] = Edge{From: e.BlockID, To: e.TargetBlockID, Branch: e.Branch}
	}
	return d, nil
}

// Clone copies the definition's slices; params maps are shared, as Apply never changes one in
// place.
func (d Definition) Clone() Definition {
	return Definition{Blocks: append([]Block(nil), d.Blocks...), Edges: append([]Edge(nil), d.Edges...)}
}
