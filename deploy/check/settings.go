package check

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// settingName is what the code's settings look like: SVC_* ours, OTEL_* the OpenTelemetry
// SDK's that libs/telemetry reads itself.
var settingName = regexp.MustCompile(`^(SVC|OTEL)_[A-Z0-9_]+$`)

// Read is one setting the code reads.
type Read struct {
	Name string
	// Method is the libs/env.Reader method ("Addr", "Secret", ...) when the name is the first
	// argument of a method call, "" for any other use (os.Getenv, a constant...).
	Method string
	// Pkg is the import path of the package that reads it.
	Pkg string
	// Pos is file:line, for messages.
	Pos string
	// Args are the call's other arguments as Go constants (string or integer literals, or
	// constants of the same package), and ArgsKnown says whether every one of them was.
	Args      []string
	ArgsKnown bool
}

// Required says the setting has no default: env.Reader's Required and Secret.
func (r Read) Required() bool { return r.Method == "Required" || r.Method == "Secret" }

// SettingsRead returns, for each service, every setting that its binary's own packages (those
// of the workspace linked into services/<name>/cmd/<name>, found with `go list -deps`) read:
// each string literal that is a setting name and the first argument of a call. Test files are
// not linked, so test-only settings (SVC_TEST_*) are not counted.
func SettingsRead(ctx context.Context, root string, services []string) (map[string][]Read, error) {
	type pkg struct {
		path, dir string
		files     []string
	}
	pkgs := map[string]pkg{}
	deps := map[string][]string{}
	for _, svc := range services {
		out, err := goList(ctx, root, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}\t{{.Module.Path}}\t{{.Dir}}\t{{join .GoFiles \",\"}}{{end}}", "./services/"+svc+"/cmd/"+svc)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Split(sc.Text(), "\t")
			if len(f) != 4 || !strings.HasPrefix(f[1], "svc.dev/") {
				continue // not a package of this repository
			}
			pkgs[f[0]] = pkg{path: f[0], dir: f[2], files: strings.Split(f[3], ",")}
			deps[svc] = append(deps[svc], f[0])
		}
	}
	reads := map[string][]Read{}
	fset := token.NewFileSet()
	for path, p := range pkgs {
		var files []*ast.File
		for _, name := range p.files {
			if name == "" {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		consts := packageConsts(files)
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				// "SVC_WEBHOOK_" + key + "_SECRET": a family of settings, recorded as the
				// pattern SVC_WEBHOOK_*_SECRET.
				if bin, ok := n.(*ast.BinaryExpr); ok && bin.Op == token.ADD {
					if pattern, ok := namePattern(bin); ok {
						pos := fset.Position(bin.Pos())
						rel, _ := filepath.Rel(root, pos.Filename)
						reads[path] = append(reads[path], Read{Name: pattern, Pkg: path, Pos: fmt.Sprintf("%s:%d", rel, pos.Line)})
						return false
					}
					return true
				}
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil || !settingName.MatchString(s) {
					return true
				}
				method := ""
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					// r.Addr("SVC_X", ...) is a method; os.Getenv("SVC_X") is not.
					if id, ok := sel.X.(*ast.Ident); !ok || !isImportName(f, id.Name) {
						method = sel.Sel.Name
					}
				}
				pos := fset.Position(lit.Pos())
				rel, _ := filepath.Rel(root, pos.Filename)
				rd := Read{Name: s, Method: method, Pkg: path, Pos: fmt.Sprintf("%s:%d", rel, pos.Line), ArgsKnown: true}
				for _, a := range call.Args[1:] {
					v, ok := constValue(a, consts)
					rd.Args = append(rd.Args, v)
					rd.ArgsKnown = rd.ArgsKnown && ok
				}
				reads[path] = append(reads[path], rd)
				return true
			})
		}
	}
	bySvc := map[string][]Read{}
	for _, svc := range services {
		for _, p := range deps[svc] {
			bySvc[svc] = append(bySvc[svc], reads[p]...)
		}
	}
	return bySvc, nil
}

// namePattern turns a concatenation that starts with a setting-like literal into a pattern,
// each operand that is not a literal becoming "*".
func namePattern(e *ast.BinaryExpr) (string, bool) {
	var parts []string
	var walk func(ast.Expr)
	walk = func(x ast.Expr) {
		switch x := x.(type) {
		case *ast.BinaryExpr:
			if x.Op == token.ADD {
				walk(x.X)
				walk(x.Y)
				return
			}
		case *ast.BasicLit:
			if s, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING {
				parts = append(parts, s)
				return
			}
		case *ast.ParenExpr:
			walk(x.X)
			return
		}
		parts = append(parts, "*")
	}
	walk(e)
	pattern := strings.Join(parts, "")
	if !strings.Contains(pattern, "*") || !settingPattern.MatchString(pattern) {
		return "", false
	}
	return pattern, true
}

// settingPattern is a setting name with * for the parts computed at run time.
var settingPattern = regexp.MustCompile(`^(SVC|OTEL)_[A-Z0-9_*]+$`)

// packageConsts maps the package-level constants of files whose value is a literal to that
// value (MailNone = "none").
func packageConsts(files []*ast.File) map[string]string {
	consts := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := constValue(vs.Values[i], nil); ok {
							consts[id.Name] = v
						}
					}
				}
			}
		}
	}
	return consts
}

// constValue evaluates a string or integer literal, or a constant in consts, as text.
func constValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		switch e.Kind {
		case token.STRING:
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case token.INT:
			n, err := strconv.ParseInt(e.Value, 0, 64)
			return strconv.FormatInt(n, 10), err == nil
		}
	case *ast.Ident:
		v, ok := consts[e.Name]
		return v, ok
	case *ast.UnaryExpr:
		if v, ok := constValue(e.X, consts); ok && e.Op == token.SUB {
			return "-" + v, true
		}
	}
	return "", false
}

// isImportName says whether name is a package imported by f (os in os.Getenv).
func isImportName(f *ast.File, name string) bool {
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := filepath.Base(path)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == name {
			return true
		}
	}
	return false
}

func goList(ctx context.Context, root string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// OptionalSettings reads the table of settings the manifests leave at their defaults from
// the section of deploy/README.md whose heading is heading: the first column of each row,
// when it is a setting name in backquotes.
func OptionalSettings(readme, heading string) (map[string]bool, error) {
	b, err := os.ReadFile(readme)
	if err != nil {
		return nil, err
	}
	cell := regexp.MustCompile("^\\|\\s*`([A-Z0-9_*]+)`\\s*\\|")
	in := false
	names := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			in = strings.TrimSpace(strings.TrimLeft(line, "#")) == heading
			continue
		}
		if m := cell.FindStringSubmatch(line); in && m != nil {
			names[m[1]] = true
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no settings table under the heading %q", readme, heading)
	}
	return names, nil
}
