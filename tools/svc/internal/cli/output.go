package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// writeJSON prints v as indented JSON. A json.RawMessage is re-indented as it came.
func writeJSON(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return fmt.Errorf("print answer: %w", err)
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeJSONLine prints v as one compact line (the follow streams: one object per line).
func writeJSONLine(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return fmt.Errorf("print answer: %w", err)
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table prints rows under a header, aligned.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// rawArray is a list of raw items as one JSON array.
func rawArray(items []json.RawMessage) json.RawMessage {
	if len(items) == 0 {
		return json.RawMessage("[]")
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// orDash shows an absent value in a table.
func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// when shows a contract timestamp in local time, compactly.
func when(ts string) string {
	if ts == "" {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// compactJSON is raw on one line, cut to max runes; "" for null or absent.
func compactJSON(raw json.RawMessage, limit int) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return cut(b.String(), limit)
}

func cut(s string, limit int) string {
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit-1]) + "…"
}

// readJSONArg reads a JSON flag value: inline JSON, @file, or @- for stdin.
func readJSONArg(value string, stdin io.Reader) (json.RawMessage, error) {
	var b []byte
	switch {
	case value == "@-":
		var err error
		if b, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
	case strings.HasPrefix(value, "@"):
		var err error
		if b, err = os.ReadFile(value[1:]); err != nil {
			return nil, err
		}
	default:
		b = []byte(value)
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return nil, fmt.Errorf("not valid JSON: %s", cut(string(b), 60))
	}
	return b, nil
}

// readJSONFile reads a JSON document from path, "-" being stdin.
func readJSONFile(path string, stdin io.Reader) (json.RawMessage, error) {
	if path == "-" {
		return readJSONArg("@-", stdin)
	}
	return readJSONArg("@"+path, stdin)
}

// listPrinter prints a list the API hands over a page at a time without keeping its items: as
// JSON, each item goes out into one indented array as it comes (the same text as writeJSON of
// the whole array); as a table, only the rows' cells are kept, for the column widths.
type listPrinter struct {
	w      io.Writer
	asJSON bool
	header []string
	row    func(item json.RawMessage) ([]string, error)
	rows   [][]string
	n      int
}

func (a *app) listPrinter(header []string, row func(item json.RawMessage) ([]string, error)) *listPrinter {
	return &listPrinter{w: a.out(), asJSON: a.jsonOutput(), header: header, row: row}
}

// page prints (or, for a table, keeps the rows of) one page's items.
func (l *listPrinter) page(items []json.RawMessage) error {
	for _, it := range items {
		if !l.asJSON {
			r, err := l.row(it)
			if err != nil {
				return err
			}
			l.rows = append(l.rows, r)
			continue
		}
		var buf bytes.Buffer
		sep := ",\n  "
		if l.n == 0 {
			sep = "[\n  "
		}
		buf.WriteString(sep)
		if err := json.Indent(&buf, it, "  ", "  "); err != nil {
			return fmt.Errorf("print answer: %w", err)
		}
		if _, err := l.w.Write(buf.Bytes()); err != nil {
			return err
		}
		l.n++
	}
	return nil
}

// close ends the array, or prints the table.
func (l *listPrinter) close() error {
	if !l.asJSON {
		return table(l.w, l.header, l.rows)
	}
	end := "\n]\n"
	if l.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(l.w, end)
	return err
}
