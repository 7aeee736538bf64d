// Package surfacetest checks, from its source, the public surface STYLE.md asks of a library
// package: every exported struct field documented, every option declared in options.go and
// every sentinel error or error type in errors.go.
//
// A package's tests call it on their own directory, so that a field added without a doc, or
// an option or sentinel declared elsewhere, fails that package's tests:
//
//	func TestExportedFieldsDocumented(t *testing.T) { surfacetest.FieldsDocumented(t, ".") }
//	func TestOptionsAndErrorsInTheirFiles(t *testing.T) { surfacetest.InTheirFiles(t, ".") }
package surfacetest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// FieldsDocumented fails t for each exported field of an exported struct type, nested struct
// types included, in dir's non-test files that has neither a doc comment nor a trailing
// comment. A comment over a group of fields documents the first one only: each field gets its
// own, so that go doc and an editor's hover show it beside the field.
func FieldsDocumented(t testing.TB, dir string) {
	t.Helper()
	report(t, dir, undocumentedFields)
}

// InTheirFiles fails t for each option declared outside options.go (a type whose name ends
// in Option, or a func that returns one), each option func whose doc does not state its
// default (says "default"), and each sentinel error or error type declared outside errors.go
// (a package-level var set by errors.New, or a type whose name ends in Error), in dir's
// non-test files.
func InTheirFiles(t testing.TB, dir string) {
	t.Helper()
	report(t, dir, misplaced)
}

func report(t testing.TB, dir string, check func(*token.FileSet, *ast.File) []string) {
	t.Helper()
	fset, files, err := parseDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("surfacetest: no Go files in %s", dir)
	}
	for _, f := range files {
		for _, p := range check(fset, f) {
			t.Error(p)
		}
	}
}

// parseDir parses the non-test Go files of dir (not its subdirectories).
func parseDir(dir string) (*token.FileSet, []*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, fmt.Errorf("surfacetest: list %s: %w", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, fmt.Errorf("surfacetest: %w", err)
		}
		files = append(files, f)
	}
	return fset, files, nil
}

// undocumentedFields lists the exported fields of f's exported struct types without a comment.
func undocumentedFields(fset *token.FileSet, f *ast.File) []string {
	var problems []string
	var walk func(owner string, st *ast.StructType)
	walk = func(owner string, st *ast.StructType) {
		for _, field := range st.Fields.List {
			name := exportedFieldName(field)
			if name == "" {
				continue
			}
			if field.Doc == nil && field.Comment == nil {
				problems = append(problems, fmt.Sprintf("%s: field %s.%s has no doc comment", fset.Position(field.Pos()), owner, name))
			}
			if inner, ok := unstar(field.Type).(*ast.StructType); ok {
				walk(owner+"."+name, inner)
			}
		}
	}
	for _, ts := range typeSpecs(f) {
		if st, ok := ts.Type.(*ast.StructType); ok && ts.Name.IsExported() {
			walk(ts.Name.Name, st)
		}
	}
	return problems
}

// exportedFieldName names a field for a report when any of its names is exported (an embedded
// field is named by its type), or returns "".
func exportedFieldName(field *ast.Field) string {
	var names []string
	for _, n := range field.Names {
		if n.IsExported() {
			names = append(names, n.Name)
		}
	}
	if len(field.Names) == 0 {
		switch x := unstar(field.Type).(type) {
		case *ast.Ident:
			if x.IsExported() {
				names = append(names, x.Name)
			}
		case *ast.SelectorExpr:
			names = append(names, x.Sel.Name)
		}
	}
	return strings.Join(names, ", ")
}

func unstar(e ast.Expr) ast.Expr {
	if s, ok := e.(*ast.StarExpr); ok {
		return s.X
	}
	return e
}

// misplaced lists the options f declares outside options.go and the sentinels and error types
// outside errors.go.
func misplaced(fset *token.FileSet, f *ast.File) []string {
	base := filepath.Base(fset.Position(f.Pos()).Filename)
	var problems []string
	wrong := func(pos token.Pos, what, want string) {
		if base != want {
			problems = append(problems, fmt.Sprintf("%s: %s belongs in %s", fset.Position(pos), what, want))
		}
	}
	for _, ts := range typeSpecs(f) {
		switch name := ts.Name.Name; {
		case strings.HasSuffix(name, "Option"):
			wrong(ts.Pos(), "option type "+name, "options.go")
		case strings.HasSuffix(name, "Error"):
			wrong(ts.Pos(), "error type "+name, "errors.go")
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && returnsOption(d.Type) {
				wrong(d.Pos(), "option "+d.Name.Name, "options.go")
				if d.Doc == nil || !strings.Contains(strings.ToLower(d.Doc.Text()), "default") {
					problems = append(problems, fmt.Sprintf("%s: option %s: its doc does not state the default", fset.Position(d.Pos()), d.Name.Name))
				}
			}
		case *ast.GenDecl:
			if d.Tok != token.VAR {
				continue
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if isErrorsNew(v) && i < len(vs.Names) {
						wrong(vs.Names[i].Pos(), "sentinel "+vs.Names[i].Name, "errors.go")
					}
				}
			}
		}
	}
	return problems
}

// returnsOption reports whether a func's only result is a type whose name ends in Option.
func returnsOption(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) != 1 {
		return false
	}
	var name string
	switch x := ft.Results.List[0].Type.(type) {
	case *ast.Ident:
		name = x.Name
	case *ast.SelectorExpr:
		name = x.Sel.Name
	}
	return strings.HasSuffix(name, "Option")
}

// isErrorsNew reports whether e is a call of errors.New.
func isErrorsNew(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "errors" && sel.Sel.Name == "New"
}

// typeSpecs returns f's top-level type declarations.
func typeSpecs(f *ast.File) []*ast.TypeSpec {
	var specs []*ast.TypeSpec
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
			for _, s := range g.Specs {
				specs = append(specs, s.(*ast.TypeSpec))
			}
		}
	}
	return specs
}
