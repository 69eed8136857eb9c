package check

import (
	"bufio"
	"bytes"
	"os"
	"strings"
)

// Instruction is one Dockerfile instruction, continuation lines joined.
type Instruction struct {
	Cmd  string // upper case: FROM, RUN, ...
	Args string
	Line int
}

// Stage is one build stage: its FROM and what follows.
type Stage struct {
	From         string // the image, "golang:${GO_VERSION}"
	Name         string // the name after AS
	Instructions []Instruction
}

// Dockerfile is a parsed Dockerfile: the ARGs before the first FROM and the stages.
type Dockerfile struct {
	GlobalArgs map[string]string
	Stages     []Stage
}

// ParseDockerfile reads the instruction structure of a Dockerfile: comments and blank lines
// dropped, backslash continuations joined, instructions grouped by stage. It is enough to
// check what an image is built from and how; it does not evaluate anything.
func ParseDockerfile(path string) (*Dockerfile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	df := &Dockerfile{GlobalArgs: map[string]string{}}
	var (
		cur   strings.Builder
		start int
		n     int
	)
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := Instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start}
		switch {
		case in.Cmd == "FROM":
			fields := strings.Fields(in.Args)
			s := Stage{}
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					s.Name = fields[i+1]
					i++
				case s.From == "":
					s.From = fields[i]
				}
			}
			df.Stages = append(df.Stages, s)
		case len(df.Stages) == 0 && in.Cmd == "ARG":
			k, v, _ := strings.Cut(in.Args, "=")
			df.GlobalArgs[k] = v
		case len(df.Stages) > 0:
			last := &df.Stages[len(df.Stages)-1]
			last.Instructions = append(last.Instructions, in)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return df, sc.Err()
}

// Find returns the stage's instructions of kind cmd.
func (s Stage) Find(cmd string) []Instruction {
	var out []Instruction
	for _, in := range s.Instructions {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}
