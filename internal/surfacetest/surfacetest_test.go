package surfacetest

import (
	"fmt"
	"go/ast"
	"go/token"
	"regexp"
	"slices"
	"testing"
)

func problems(t *testing.T, dir string, check func(*token.FileSet, *ast.File) []string) []string {
	t.Helper()
	fset, files, err := parseDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, f := range files {
		all = append(all, check(fset, f)...)
	}
	return all
}

// TestGoodPackagePasses: documented fields (doc or trailing comment, nested ones included),
// options in options.go and errors in errors.go give no problem; unexported types and
// fields, and a local errors.New, are not asked about.
func TestGoodPackagePasses(t *testing.T) {
	for name, check := range map[string]func(*token.FileSet, *ast.File) []string{"fields": undocumentedFields, "files": misplaced} {
		if p := problems(t, "testdata/good", check); len(p) > 0 {
			t.Errorf("%s: %q", name, p)
		}
	}
}

// TestBadPackageFails names every undocumented field and every misplaced declaration.
func TestBadPackageFails(t *testing.T) {
	cases := []struct {
		name  string
		check func(*token.FileSet, *ast.File) []string
		want  []string
	}{
		{"fields", undocumentedFields, []string{
			`thing.go:12:2: field Thing.Size has no doc comment`,
			`thing.go:13:2: field Thing.Inner has no doc comment`,
			`thing.go:14:3: field Thing.Inner.Depth has no doc comment`,
			`thing.go:16:2: field Thing.Embedded has no doc comment`,
		}},
		{"files", misplaced, []string{
			`thing.go:23:6: option type Option belongs in options.go`,
			`thing.go:29:6: error type ThingError belongs in errors.go`,
			`thing.go:6:5: sentinel ErrMisplaced belongs in errors.go`,
			`thing.go:26:1: option WithSize belongs in options.go`,
			`thing.go:26:1: option WithSize: its doc does not state the default`,
		}},
	}
	dir := regexp.MustCompile(`^testdata/bad/`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, p := range problems(t, "testdata/bad", c.check) {
				got = append(got, dir.ReplaceAllString(p, ""))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

// recorder is a testing.TB that keeps its failures instead of failing.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Error(args ...any)                 { r.failures = append(r.failures, fmt.Sprint(args...)) }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }

// TestReports: the exported checks fail their t once per problem, and a directory with no Go
// file is a failure, not a pass with nothing checked.
func TestReports(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(testing.TB, string)
		dir   string
		want  int
	}{
		{"fields of a bad package", FieldsDocumented, "testdata/bad", 4},
		{"files of a bad package", InTheirFiles, "testdata/bad", 5},
		{"fields of a good package", FieldsDocumented, "testdata/good", 0},
		{"files of a good package", InTheirFiles, "testdata/good", 0},
		{"an empty directory", FieldsDocumented, t.TempDir(), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{TB: t}
			c.check(r, c.dir)
			if len(r.failures) != c.want {
				t.Errorf("%d failures, want %d: %q", len(r.failures), c.want, r.failures)
			}
		})
	}
}
