package termsig_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every Go snippet of README.md and every code block of the doc comments of
// the module's packages (what go doc -all shows: package docs, and the docs
// of consts, vars, types, funcs, methods and fields) must build, so that a
// reader who copies one gets code that compiles. Each document is
// type-checked as one package against the module's packages as they are:
// its declaration blocks as files, each fragment of statements wrapped in a
// function of its own, with the names it leaves free declared in freeNames.
func TestEveryDocSnippetCompiles(t *testing.T) {
	docs := []document{readme(t, "README.md")}
	pkgs, err := packageDocs(".")
	require.NoError(t, err)
	docs = append(docs, pkgs...)
	n := 0
	for _, d := range docs {
		n += len(d.snippets)
	}
	require.Greater(t, n, 10, "the snippets were not found")
	for _, err := range checkDocs(docs) {
		t.Error(err)
	}
}

// A snippet checker that passed everything would prove nothing: the
// mistakes the docs have had are caught.
func TestSnippetCheckerCatchesBrokenSnippets(t *testing.T) {
	var docs []document
	var want []string
	for _, tc := range []struct {
		name, code, want string
	}{
		{"unused variable", "err := work(context.Background())", "declared and not used: err"},
		{"missing import", "import (\n\t\"github.com/termsig/termsig\"\n)\n\nn := termsig.New()\nn.Stop()\nlog.Print(n)", "undefined: log"},
		{"unused source", "srv := imdstest.NewServer()\nsrc := imds.New(imds.Config{Endpoint: srv.URL})", "declared and not used: src"},
		{"old signature", "nt.DrainContext(context.Background(), time.Second, 30*time.Second)", "too many arguments"},
		{"unqualified name", "Fault{Count: 40, Status: 503} // a burst of 503", "undefined: Fault"},
		{"not Go", "bus, err := logindtest.StartBus()\n...\ndefer bus.Close()", "expected"},
		{"sound", "if nt.Kind.Imminent() {\n\treturn\n}", ""}, // so the wrapper is sound
	} {
		docs = append(docs, document{name: tc.name, snippets: []snippet{{where: fmt.Sprintf("case%d.md:1", len(docs)), text: tc.code}}})
		want = append(want, tc.want)
	}
	errs := checkDocs(docs) // at once: one go list
	for i, d := range docs {
		var got []string
		for _, err := range errs {
			if strings.HasPrefix(err.Error(), fmt.Sprintf("case%d.md:", i)) {
				got = append(got, err.Error())
			}
		}
		if want[i] == "" {
			assert.Empty(t, got, d.name)
			continue
		}
		if assert.NotEmpty(t, got, "%s: a broken snippet passed", d.name) {
			assert.Contains(t, got[0], want[i], d.name)
		}
	}
}

func TestReadmeCodeBlocksSayTheirLanguage(t *testing.T) {
	_, err := fencedBlocks("README.md", "text\n```\ngo test ./...\n```\n")
	assert.ErrorContains(t, err, "README.md:2: a code block without a language")
}

// freeNames declares what the snippets use without declaring: what the
// program or test around a snippet has. The entry "" is given to every
// document, the others to the package of that directory.
var freeNames = map[string]string{
	"": `var (
		t                *testing.T                  // the test's, in the docs of test helpers
		n                *termsig.Notifier           // the program's, in method docs
		nt               termsig.Notice              // a notice it received
		drain, handBack  func(context.Context)       // its clean-up
		work             func(context.Context) error // its work
		advise           func(termsig.Notice)        // what it does with advice
		finishThenReexec func()                      // what it does on SIGHUP
	)`,
	"imds/imdstest":       `var srv *imdstest.Server`,
	"gcemeta/gcemetatest": `var srv *gcemetatest.Server`,
	"azure/azuretest":     `var srv *azuretest.Server`,
	"examples/registry":   `var admin, join string`,
}

// notGo lists the doc-comment code blocks that are not Go, by directory
// and first line (spaces collapsed), with what they are. Shell commands
// (lines that start with a go subcommand, "termsig " or "$ ") need no
// entry. Every other block must build.
var notGo = map[string]string{
	".: imds: terminate (spot interruption: terminate), deadline 2026-11-30T10:02:00Z (in 1m59s)": "what Notice.String prints",
}

var shellLine = regexp.MustCompile(`^(\$ |termsig( |$)|go (run|test|build|install|vet|generate|get|doc|list|tool|mod|env|version)( |$))`)

// A document is the code of README.md, or of the doc comments of one
// package, checked as one package.
type document struct {
	name     string // README.md, or the package's directory relative to the module root
	snippets []snippet
}

// A snippet is one code block.
type snippet struct {
	where string // file:line of its first line, for //line directives and messages
	text  string
}

// readme returns the Go blocks of the markdown file name.
func readme(t *testing.T, name string) document {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	s, err := fencedBlocks(name, string(b))
	require.NoError(t, err)
	return document{name: name, snippets: s}
}

var fence = regexp.MustCompile("^```(\\S*)")

// fencedBlocks returns the ```go blocks of markdown text. A block of
// another language (sh, text) is left out; one without a language is an
// error, since nothing would then say whether it must build.
func fencedBlocks(name, text string) ([]snippet, error) {
	var out []snippet
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
		}
		switch m[1] {
		case "go":
			out = append(out, snippet{fmt.Sprintf("%s:%d", name, start+1), strings.Join(lines[start:i], "\n")})
		case "":
			return nil, fmt.Errorf("%s:%d: a code block without a language: say ```go (it must build) or ```sh", name, start)
		}
	}
	return out, nil
}

// packageDocs returns the code blocks of the doc comments of every package
// below root that belongs to root's module, one document per package.
func packageDocs(root string) ([]document, error) {
	var docs []document
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != root {
			if name := d.Name(); strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, p := range pkgs {
			files := make([]*ast.File, 0, len(p.Files))
			for _, name := range slices.Sorted(maps.Keys(p.Files)) {
				files = append(files, p.Files[name])
			}
			dp, err := doc.NewFromFiles(fset, files, "example.com/"+dir)
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(dir)
			s, err := docBlocks(rel, dp)
			if err != nil {
				return err
			}
			if len(s) > 0 {
				docs = append(docs, document{name: rel, snippets: s})
			}
		}
		return nil
	})
	return docs, err
}

// docBlocks returns the code blocks of the docs of p that are Go.
func docBlocks(dir string, p *doc.Package) ([]snippet, error) {
	name := dir // as it names the snippets
	if dir == "." {
		name = "termsig"
	}
	var out []snippet
	add := func(where, text string) {
		for _, b := range p.Parser().Parse(text).Content {
			c, ok := b.(*comment.Code)
			if !ok {
				continue
			}
			lines := strings.Split(strings.TrimRight(c.Text, "\n"), "\n")
			if _, listed := notGo[dir+": "+strings.Join(strings.Fields(lines[0]), " ")]; listed {
				continue
			}
			if !slices.ContainsFunc(lines, func(l string) bool { return !shellLine.MatchString(l) }) {
				continue // shell commands
			}
			out = append(out, snippet{fmt.Sprintf("%s (doc of %s):1", name, where), c.Text})
		}
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			add(strings.Join(v.Names, ", "), v.Doc)
		}
	}
	add("package "+p.Name, p.Doc)
	values(p.Consts)
	values(p.Vars)
	for _, f := range p.Funcs {
		add(f.Name, f.Doc)
	}
	for _, ty := range p.Types {
		add(ty.Name, ty.Doc)
		values(ty.Consts)
		values(ty.Vars)
		for _, f := range ty.Funcs {
			add(f.Name, f.Doc)
		}
		for _, f := range ty.Methods {
			add(ty.Name+"."+f.Name, f.Doc)
		}
		for _, spec := range ty.Decl.Specs {
			var fields *ast.FieldList
			switch x := spec.(*ast.TypeSpec).Type.(type) {
			case *ast.StructType:
				fields = x.Fields
			case *ast.InterfaceType:
				fields = x.Methods
			}
			for _, f := range fieldList(fields) {
				for _, name := range f.Names {
					add(ty.Name+"."+name.Name, f.Doc.Text())
				}
			}
		}
	}
	return out, nil
}

func fieldList(fl *ast.FieldList) []*ast.Field {
	if fl == nil {
		return nil
	}
	return fl.List
}

// checkDocs type-checks each document and returns what is wrong.
func checkDocs(docs []document) []error {
	known, err := modulePackages(".")
	if err != nil {
		return []error{err}
	}
	type checked struct {
		name  string
		fset  *token.FileSet
		files []*ast.File
	}
	var all []checked
	var errs []error
	paths := map[string]bool{}
	for _, d := range docs {
		c := checked{name: d.name, fset: token.NewFileSet()}
		var free []snippet
		for _, key := range []string{"", d.name} {
			if src, ok := freeNames[key]; ok {
				free = append(free, snippet{where: "freeNames[" + key + "]:1", text: src})
			}
		}
		parsed := true
		for _, s := range append(free, d.snippets...) {
			f, err := snippetFile(c.fset, s, known)
			if err != nil {
				errs = append(errs, err)
				parsed = false
				continue
			}
			c.files = append(c.files, f)
		}
		if !parsed {
			continue // its type errors would only follow from the parse errors
		}
		for _, f := range c.files {
			for _, imp := range f.Imports {
				paths[strings.Trim(imp.Path.Value, `"`)] = true
			}
		}
		all = append(all, c)
	}
	exports, err := exportData(slices.Sorted(maps.Keys(paths)))
	if err != nil {
		return append(errs, err)
	}
	for _, c := range all {
		conf := types.Config{
			Importer: importer.ForCompiler(c.fset, "gc", func(path string) (io.ReadCloser, error) {
				file, ok := exports[path]
				if !ok {
					return nil, fmt.Errorf("no export data for %q", path)
				}
				return os.Open(file)
			}),
			Error: func(err error) { errs = append(errs, err) },
		}
		_, _ = conf.Check("snippets", c.fset, c.files, nil)
	}
	return errs
}

// importPrefix matches an import declaration at the start of a snippet.
var importPrefix = regexp.MustCompile(`(?s)\A\s*(import\s*(?:\(.*?\n\)|"[^"]*"))[ \t]*\n`)

// snippetFile turns s into a file of package snippets. A snippet of
// declarations is the file. A snippet of statements is the body of a
// function of its own, func _(), or func _() error when it returns a
// value; a snippet whose statements are all values (composite literals,
// not calls) has each checked as a value, _ = v. A snippet with an import
// declaration uses exactly those imports; one without gets those of the
// packages in known that it names.
func snippetFile(fset *token.FileSet, s snippet, known map[string]string) (*ast.File, error) {
	file, line := s.where[:strings.LastIndex(s.where, ":")], 0
	fmt.Sscan(s.where[len(file)+1:], &line)
	directive := func(n int) string { return fmt.Sprintf("\n//line %s:%d\n", file, n) }

	imports, body := "", s.text
	if m := importPrefix.FindStringSubmatchIndex(s.text); m != nil {
		imports, body = s.text[m[2]:m[3]], s.text[m[1]:]
	}
	bodyLine := line + strings.Count(s.text[:len(s.text)-len(body)], "\n")
	head := "package snippets\n" + directive(line) + imports + "\n"

	// Declarations, or statements?
	src := head + directive(bodyLine) + body
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	wrapped := err != nil
	if wrapped {
		src = head + "func _() {" + directive(bodyLine) + body + "\n}\n"
		f, err = parser.ParseFile(token.NewFileSet(), "", src, 0)
		if err != nil {
			return nil, err
		}
		if returnsValue(f.Decls[len(f.Decls)-1].(*ast.FuncDecl).Body) {
			src = head + "func _() error {" + directive(bodyLine) + body + "\nreturn nil\n}\n"
		}
	}
	if imports == "" {
		f, err := parser.ParseFile(token.NewFileSet(), "", src, 0)
		if err != nil {
			return nil, err
		}
		var add []string
		for _, id := range f.Unresolved {
			if p, ok := known[id.Name]; ok && !slices.Contains(add, p) {
				add = append(add, p)
			}
		}
		slices.Sort(add)
		var b strings.Builder
		for _, p := range add {
			fmt.Fprintf(&b, "import %q\n", p)
		}
		src = strings.Replace(src, head, "package snippets\n"+b.String(), 1)
	}
	// The file has no name: the //line directives name the snippet, and a
	// relative name in them would be taken relative to the file's.
	f, err = parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if wrapped {
		valuesOnly(f.Decls[len(f.Decls)-1].(*ast.FuncDecl).Body)
	}
	return f, nil
}

// returnsValue reports whether body has a return statement with results
// of its own (not one of a function literal).
func returnsValue(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			found = found || len(n.Results) > 0
		}
		return !found
	})
	return found
}

// valuesOnly turns each statement of body into _ = v when all of them are
// values that are not calls or receives, such as a list of composite
// literals: a statement v would not compile, though the list is sound.
func valuesOnly(body *ast.BlockStmt) {
	for _, st := range body.List {
		es, ok := st.(*ast.ExprStmt)
		if !ok {
			return
		}
		switch x := ast.Unparen(es.X).(type) {
		case *ast.CallExpr:
			return
		case *ast.UnaryExpr:
			if x.Op == token.ARROW {
				return
			}
		}
	}
	for i, st := range body.List {
		x := st.(*ast.ExprStmt).X
		body.List[i] = &ast.AssignStmt{Lhs: []ast.Expr{ast.NewIdent("_")}, TokPos: x.Pos(), Tok: token.ASSIGN, Rhs: []ast.Expr{x}}
	}
}

// stdNames are the standard packages that snippets may name without
// importing them.
var stdNames = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "http": "net/http", "json": "encoding/json",
	"log": "log", "os": "os", "slog": "log/slog", "testing": "testing", "time": "time",
}

// modulePackages returns the import path of each package of the module
// at root that a program can import, by package name, and stdNames.
func modulePackages(root string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(b)
	if m == nil {
		return nil, fmt.Errorf("go.mod: no module line")
	}
	module := string(m[1])
	known := maps.Clone(stdNames)
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel := filepath.ToSlash(dir)
		if dir != root {
			if name := d.Name(); strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "internal" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		for name := range pkgs {
			if name != "main" {
				known[name] = path.Join(module, rel) // a module package wins over a standard one: signal
			}
		}
		return nil
	})
	return known, err
}

// exportData returns the export data file of each package that paths
// need, from go list, built as the test binary was (-race, -tags) so that
// the build cache of the test run serves it.
func exportData(paths []string) (map[string]string, error) {
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "-race" && s.Value == "true":
				args = append(args, "-race")
			case s.Key == "-tags" && s.Value != "":
				args = append(args, "-tags", s.Value)
			}
		}
	}
	cmd := exec.Command("go", append(args, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, file, _ := strings.Cut(strings.TrimSpace(line), "\t")
		if file != "" {
			exports[path] = file
		}
	}
	return exports, nil
}
