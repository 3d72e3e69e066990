package loop

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Runners never print: they emit events and sinks render them (DESIGN.md
// section 3). This fails when a non-test file of a runner package writes to
// a user-facing stream: fmt.Print*, fmt.Fprint* to anything but a local
// builder, or os.Stdout / os.Stderr.
func TestRunnersNeverPrint(t *testing.T) {
	for _, c := range []struct {
		dir string
		// known lists packages not yet converted to events; their
		// prints are logged, not failed (issue 14 converts them next).
		known bool
	}{
		{dir: "."},
		{dir: "../thread"},
		{dir: "../session"},
	} {
		prints := userPrints(t, c.dir)
		switch {
		case len(prints) > 0 && c.known:
			t.Logf("%s still prints in %d places (known, not yet converted to events)", c.dir, len(prints))
		case len(prints) > 0:
			t.Errorf("%s writes to a user-facing stream instead of emitting events:\n%s", c.dir, strings.Join(prints, "\n"))
		}
	}
}

func userPrints(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "os" && (n.Sel.Name == "Stdout" || n.Sel.Name == "Stderr") {
					found = append(found, fset.Position(n.Pos()).String()+": os."+n.Sel.Name)
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "fmt" {
					return true
				}
				name := sel.Sel.Name
				switch {
				case strings.HasPrefix(name, "Print"):
					found = append(found, fset.Position(n.Pos()).String()+": fmt."+name)
				case strings.HasPrefix(name, "Fprint") && len(n.Args) > 0 && !localBuffer(n.Args[0]):
					found = append(found, fset.Position(n.Pos()).String()+": fmt."+name)
				}
			}
			return true
		})
	}
	return found
}

// localBuffer reports whether w is &x or x for a variable declared in the
// function (a strings.Builder, a bytes.Buffer, a hash): writing there
// shows nothing to anyone.
func localBuffer(w ast.Expr) bool {
	if u, ok := w.(*ast.UnaryExpr); ok && u.Op == token.AND {
		w = u.X
	}
	id, ok := w.(*ast.Ident)
	return ok && id.Obj != nil && id.Obj.Kind == ast.Var && !isParam(id)
}

// isParam reports whether id is a function's parameter: a writer handed in
// is a stream someone else chose, so it counts as a print.
func isParam(id *ast.Ident) bool {
	f, ok := id.Obj.Decl.(*ast.Field)
	return ok && f != nil
}
