package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// JSON returns the document as JSON (what GET /api/openapi.json serves): the same svc.yaml the
// route tests read, with its members in the document's order. YAML that JSON cannot hold (a
// non-scalar key, a tag other than the core schema's) is an error, so a document that would
// serve differently from what the tests check never ships.
func JSON() ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(document, &root); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var buf bytes.Buffer
	if err := writeNode(&buf, &root); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if !json.Valid(buf.Bytes()) {
		return nil, fmt.Errorf("openapi: the JSON form is not valid JSON")
	}
	return buf.Bytes(), nil
}

func writeNode(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: want one document", n.Line)
		}
		return writeNode(buf, n.Content[0])
	case yaml.AliasNode:
		return writeNode(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a mapping key is not a scalar", k.Line)
			}
			if k.Tag == "!!merge" {
				return fmt.Errorf("line %d: merge keys are not supported", k.Line)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeString(buf, k.Value); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeNode(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeNode(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	}
	return fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
}

func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!str":
		return writeString(buf, n.Value)
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.WriteString(strconv.FormatInt(i, 10))
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err) // NaN or Inf: JSON has neither
		}
		buf.Write(b)
	default:
		return fmt.Errorf("line %d: tag %s has no JSON form", n.Line, n.ShortTag())
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}
