package termsig_test

import (
	"bytes"
	"errors"
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
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every Go snippet of the module's Markdown files and every code block of
// the doc comments of its packages (what go doc -all shows: package docs,
// and the docs of consts, vars, types, funcs, methods and fields, and of
// each const or var of a group) must build, so that a reader who copies one
// gets code that compiles. A snippet that is a whole program (it starts
// with a package clause) is checked as a package of its own. The other
// snippets of a document are checked as one package against the module's
// packages as they are: its declaration blocks as files, each fragment of
// statements wrapped in a function of its own, with a declaration of each
// name of freeNames that they use and do not declare.
func TestEveryDocSnippetCompiles(t *testing.T) {
	docs, err := theModuleDocs()
	require.NoError(t, err)
	for _, err := range checkDocs(docs) {
		t.Error(err)
	}
}

// snippetCounts is how many Go snippets each document has (a Markdown file
// by its path, a package's doc comments by its directory); a document
// without any is not listed. Losing one, because the extraction no longer
// sees a kind of fence or of doc comment, would otherwise pass unnoticed:
// what is not found is not checked.
var snippetCounts = map[string]int{
	"README.md":                   4,
	"alibaba":                     1,
	"alibaba/alibabatest":         2,
	"tencent":                     1,
	"tencent/tencenttest":         2,
	"DESIGN.md":                   1,
	"examples/registry/README.md": 2,
	".":                           4, // package termsig
	"asg":                         1,
	"asg/asgtest":                 2,
	"azure/azuretest":             3,
	"examples/registry":           1,
	"gcemeta":                     1,
	"gcemeta/gcemetatest":         2,
	"imds":                        1,
	"imds/imdstest":               2,
	"logind/logindtest":           1,
	"termsigtest":                 2,
}

// Each document yields the snippets that snippetCounts says it has.
func TestNoDocLosesItsSnippets(t *testing.T) {
	docs, err := theModuleDocs()
	require.NoError(t, err)
	got := map[string]int{}
	for _, d := range docs {
		got[d.name] = len(d.snippets)
	}
	assert.Equal(t, snippetCounts, got, "Go snippets per document: if you added or removed some, update snippetCounts")
}

// A snippet checker that passed everything would prove nothing: the
// mistakes the docs have had are caught, and the correct snippets that an
// earlier checker rejected pass.
func TestSnippetCheckerCatchesBrokenSnippets(t *testing.T) {
	var docs []document
	var want []string
	for _, tc := range []struct {
		name string
		code []string // the snippets of one document
		want string   // what its first error says; "" for none
	}{
		{"unused variable", []string{"err := work(context.Background())"}, "declared and not used: err"},
		{"missing import", []string{"import (\n\t\"github.com/termsig/termsig\"\n)\n\nn := termsig.New()\nn.Stop()\nlog.Print(n)"}, "undefined: log"},
		{"unused source", []string{"srv := imdstest.NewServer()\nsrc := imds.New(imds.Config{Endpoint: srv.URL})"}, "declared and not used: src"},
		{"old signature", []string{"nt.DrainContext(context.Background(), time.Second, 30*time.Second)"}, "too many arguments"},
		{"unqualified name", []string{"Fault{Count: 40, Status: 503} // a burst of 503"}, "undefined: Fault"},
		{"not Go", []string{"bus, err := logindtest.StartBus()\n...\ndefer bus.Close()"}, "expected"},
		{"sound", []string{"if nt.Kind.Imminent() {\n\treturn\n}"}, ""}, // so the wrapper is sound

		// A whole program is a package of its own: it gets no free names
		// and no imports, and its names are its own.
		{"whole program", []string{"package main\n\nimport \"github.com/termsig/termsig\"\n\nfunc main() {\n\tn := termsig.New()\n\tdefer n.Stop()\n}"}, ""},
		{"program without its imports", []string{"package main\n\nfunc main() {\n\tfmt.Println()\n}"}, "undefined: fmt"},
		{"program using a free name", []string{"package main\n\nfunc main() {\n\tt.Log()\n}"}, "undefined: t"},
		{"programs beside fragments", []string{"package main\n\nfunc drain() {}\n\nfunc main() { drain() }", "// Command two.\npackage main\n\nfunc main() {}", "drain(ctx)"}, ""},

		// A name of freeNames that a document declares is its own.
		{"helper named as a free name", []string{"func drain(ctx context.Context) {\n\tn.Stop()\n}", "drain(context.Background())"}, ""},
		{"variable named as a free name", []string{"var n = termsig.New()", "n.Stop()"}, ""},
		{"free name used by two fragments", []string{"t.Log()", "t.Log()"}, ""},
	} {
		d := document{name: tc.name}
		for j, code := range tc.code {
			d.snippets = append(d.snippets, snippet{fmt.Sprintf("case%d.md:%d", len(docs), 100*j+1), code})
		}
		docs = append(docs, d)
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
	for _, err := range errs {
		assert.Regexp(t, `^case\d+\.md:`, err.Error(), "an error outside the cases")
	}
}

// Markdown code blocks are found as GitHub renders them, by CommonMark's
// rules: the language is go or golang in any case; the fence may be
// indented by up to three spaces, be of backticks or of tildes, and be
// longer than three, and only a fence of the same character, at least as
// long, closes it.
func TestSnippetFencesAreTheOnesGitHubRendersAsGo(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		want     []snippet
	}{
		{"go", "text\n\n```go\nx()\n```\n", []snippet{{"a.md:4", "x()"}}},
		{"Go", "```Go\nx()\n```\n", []snippet{{"a.md:2", "x()"}}},
		{"golang", "```golang\nx()\n```\n", []snippet{{"a.md:2", "x()"}}},
		{"GOLANG with more info", "``` GOLANG title=\"x.go\"\nx()\n```\n", []snippet{{"a.md:2", "x()"}}},
		{"indented, in a list item", "1. Call it:\n\n   ```go\n   x()\n   \tif y {\n     }\n   ```\n", []snippet{{"a.md:4", "x()\n\tif y {\n  }"}}},
		{"tildes", "~~~go\nx()\n~~~\n", []snippet{{"a.md:2", "x()"}}},
		{"four backticks around three", "````go\n// ```go\nx()\n```\n````\n", []snippet{{"a.md:2", "// ```go\nx()\n```"}}},
		{"closed by a longer fence", "```go\nx()\n`````  \n", []snippet{{"a.md:2", "x()"}}},
		{"tildes do not close backticks", "```go\nx()\n~~~\n```\n", []snippet{{"a.md:2", "x()\n~~~"}}},
		{"CRLF", "```go\r\nx()\r\n```\r\n", []snippet{{"a.md:2", "x()\r"}}},
		{"two blocks", "```go\nx()\n```\n\n~~~Go\ny()\n~~~\n", []snippet{{"a.md:2", "x()"}, {"a.md:6", "y()"}}},
		{"other languages", "```sh\ngo test\n```\n```Console\n$ go test\n```\n~~~jsonc\n{} // none\n~~~\n```yaml\na: 1\n```\n", nil},
		{"a go block inside another language's", "````text\n```go\nx(\n```\n````\n", nil},
		{"an indented code block is not a fence", "    ```go\n    x(\n    ```\n", nil},
		{"inline code is not a fence", "```go``` is how to start one\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fencedBlocks("a.md", tc.md)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A code block that does not say what it is, or says something unknown,
// could be Go that nobody checks: it is an error, naming where it is.
func TestSnippetFencesSayTheirLanguage(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		want     []string
	}{
		{"none", "text\n```\ngo test ./...\n```\n", []string{"a.md:2: a code block without a language"}},
		{"unknown", "text\n\n  ~~~rust\nfn main() {}\n  ~~~\n", []string{`a.md:3: a code block in "rust"`}},
		{"never closed", "```go\nx()\n``\n", []string{"a.md:1: a code block that is never closed"}},
		{"each of them", "```\na\n```\n```gopher\nb\n```\n", []string{"a.md:1: a code block without a language", `a.md:4: a code block in "gopher"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fencedBlocks("a.md", tc.md)
			for _, want := range tc.want {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

// The Markdown files read are all those of the root module, and only
// those: not a nested module's, nor those of testdata, dist (goreleaser's
// output) or .git.
func TestSnippetsAreReadFromEveryMarkdownFileOfTheModule(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{
		"README.md", "docs/guide.md", "docs/deep/notes.md", "notes.txt",
		"nested/go.mod", "nested/README.md", "testdata/x.md", "dist/CHANGELOG.md", ".git/x.md",
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, name), nil, 0o644))
	}
	got, err := markdownFiles(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"README.md", "docs/deep/notes.md", "docs/guide.md"}, got)

	got, err = markdownFiles(".")
	require.NoError(t, err)
	assert.Subset(t, got, []string{"BENCHMARKS.md", "DESIGN.md", "README.md", "cmd/termsig/README.md", "examples/registry/README.md", "examples/runner/README.md"})
	assert.NotContains(t, got, "examples/kubedrain/README.md", "a module of its own")
	assert.NotContains(t, got, "examples/ghrunner/README.md", "a module of its own")
}

// The docs of the consts and vars of a group are read, each spec's as well
// as the group's: go doc -all shows them.
func TestSnippetsOfEachSpecOfAGroupAreFound(t *testing.T) {
	const src = `// Package p is a package.
package p

// The kinds.
//
//	_ = p.A
const (
	// A is a kind:
	//
	//	_ = p.A + 1
	A = iota
	B // no doc
	// c is unexported: go doc does not show it.
	//
	//	_ = c
	c
)

var (
	// X and Y are variables:
	//
	//	_ = p.X
	X, Y int
)
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	require.NoError(t, err)
	p, err := doc.NewFromFiles(fset, []*ast.File{f}, "example.com/p")
	require.NoError(t, err)
	assert.Equal(t, []snippet{
		{"p (doc of A, B):1", "_ = p.A\n"},
		{"p (doc of A):1", "_ = p.A + 1\n"},
		{"p (doc of X, Y):1", "_ = p.X\n"},
	}, docBlocks("p", p))
}

// freeNames are the names that snippets use without declaring them: what
// the program or test around a snippet has, with their types. The entry ""
// is every document's; the others are one document's (a package's
// directory, or a Markdown file), and win over "". A document gets a
// declaration of only the names that it uses and does not declare.
var freeNames = map[string]map[string]string{
	"": {
		"t":                "*testing.T",                  // the test's, in the docs of test helpers
		"ctx":              "context.Context",             // the context of the program's work
		"n":                "*termsig.Notifier",           // the program's, in method docs
		"nt":               "termsig.Notice",              // a notice it received
		"drain":            "func(context.Context)",       // its clean-up
		"handBack":         "func(context.Context)",       // its clean-up
		"work":             "func(context.Context) error", // its work
		"advise":           "func(termsig.Notice)",        // what it does with advice
		"finishThenReexec": "func()",                      // what it does on SIGHUP
	},
	"imds/imdstest":               {"srv": "*imdstest.Server"},
	"gcemeta/gcemetatest":         {"srv": "*gcemetatest.Server"},
	"azure/azuretest":             {"srv": "*azuretest.Server"},
	"asg/asgtest":                 {"srv": "*asgtest.Server"},
	"alibaba/alibabatest":         {"srv": "*alibabatest.Server"},
	"tencent/tencenttest":         {"srv": "*tencenttest.Server"},
	"examples/registry":           {"admin": "string", "join": "string"},
	"examples/registry/README.md": {"adminToken": "string", "joinToken": "string"},
}

// notGo lists the doc-comment code blocks that are not Go, by directory
// and first line (spaces collapsed), with what they are. Shell commands
// (lines that start with a go subcommand, "termsig " or "$ ") need no
// entry. Every other block must build.
var notGo = map[string]string{
	".: imds: terminate (spot interruption: terminate), deadline 2026-11-30T10:02:00Z (in 1m59s)":              "what Notice.String prints",
	"asg: aws autoscaling put-lifecycle-hook --auto-scaling-group-name GROUP --lifecycle-hook-name termsig \\": "an AWS CLI command",
	`asg: {"Effect": "Allow", "Resource": "*", "Action": [`:                                                    "an IAM policy statement",
}

var shellLine = regexp.MustCompile(`^(\$ |termsig( |$)|go (run|test|build|install|vet|generate|get|doc|list|tool|mod|env|version)( |$))`)

// notGoLanguages are the languages of Markdown code blocks that are not Go,
// in lower case. A block of any other language but go or golang is an
// error: add its language here if it is not Go.
var notGoLanguages = []string{"sh", "shell", "bash", "console", "text", "ini", "yaml", "json", "jsonc"}

// A document is the code of a Markdown file, or of the doc comments of
// one package.
type document struct {
	name     string // the Markdown file's path, or the package's directory, relative to the module root
	snippets []snippet
}

// A snippet is one code block.
type snippet struct {
	where string // file:line of its first line, for //line directives and messages
	text  string
}

// theModuleDocs is moduleDocs("."), read once for the tests that need it:
// parsing the module takes a quarter of a second under -race.
var theModuleDocs = sync.OnceValues(func() ([]document, error) { return moduleDocs(".") })

// moduleDocs returns the documents of the module at root: its Markdown
// files, then its packages, each with its Go snippets. Its error is every
// code block that does not say whether it is Go.
func moduleDocs(root string) ([]document, error) {
	names, err := markdownFiles(root)
	if err != nil {
		return nil, err
	}
	var docs []document
	var errs []error
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return nil, err
		}
		s, err := fencedBlocks(name, string(b))
		errs = append(errs, err)
		if len(s) > 0 {
			docs = append(docs, document{name: name, snippets: s})
		}
	}
	pkgs, err := packageDocs(root)
	if err != nil {
		return nil, err
	}
	return append(docs, pkgs...), errors.Join(errs...)
}

// walkModule walks the tree at root as filepath.WalkDir does, leaving out
// the nested modules (directories with a go.mod of their own) and the
// directories whose name skip reports.
func walkModule(root string, skip func(name string) bool, fn func(path string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root {
			if skip(d.Name()) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		return fn(p, d)
	})
}

// notPackages reports whether the go command leaves a directory out of a
// module's packages.
func notPackages(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata"
}

// markdownFiles returns the paths of the Markdown files of the module at
// root, relative to it, leaving out .git, testdata and dist (goreleaser's
// output).
func markdownFiles(root string) ([]string, error) {
	var names []string
	err := walkModule(root, func(name string) bool {
		return name == ".git" || name == "testdata" || name == "dist"
	}, func(p string, d fs.DirEntry) error {
		if d.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	return names, err
}

// fenceOpen matches the line that opens a fenced code block, as CommonMark
// has it: up to three spaces, three or more backticks or tildes, then the
// info string, whose first word is the language.
var fenceOpen = regexp.MustCompile("^( {0,3})(`{3,}|~{3,})\\s*(\\S*)")

// fencedBlocks returns the Go blocks of markdown text (go or golang, in
// any case). A block of a language of notGoLanguages is left out; one
// without a language, or of another language, is an error, since nothing
// would then say whether it must build.
func fencedBlocks(name, text string) ([]snippet, error) {
	var out []snippet
	var errs []error
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence, lang := len(m[1]), m[2], m[3]
		if fence[0] == '`' && strings.Contains(lines[i][len(m[1])+len(fence):], "`") {
			continue // inline code: the info string of a backtick fence has no backtick
		}
		open := i + 1 // its line number
		var body []string
		for i++; i < len(lines) && !closes(lines[i], fence); i++ {
			body = append(body, trimIndent(lines[i], indent))
		}
		where := fmt.Sprintf("%s:%d", name, open)
		switch l := strings.ToLower(lang); {
		case i == len(lines):
			errs = append(errs, fmt.Errorf("%s: a code block that is never closed: end it with %s", where, fence))
		case l == "go" || l == "golang":
			out = append(out, snippet{fmt.Sprintf("%s:%d", name, open+1), strings.Join(body, "\n")})
		case l == "":
			errs = append(errs, fmt.Errorf("%s: a code block without a language: say %sgo (it must build) or %stext", where, fence, fence))
		case !slices.Contains(notGoLanguages, l):
			errs = append(errs, fmt.Errorf("%s: a code block in %q: say go if it must build, or add %q to notGoLanguages in snippets_test.go", where, lang, l))
		}
	}
	return out, errors.Join(errs...)
}

// closes reports whether line closes a block that fence opened: up to
// three spaces, at least as many of the fence's character, nothing else.
func closes(line, fence string) bool {
	rest := strings.TrimLeft(line, " ")
	if len(line)-len(rest) > 3 {
		return false
	}
	after := strings.TrimLeft(rest, fence[:1])
	return len(rest)-len(after) >= len(fence) && strings.TrimSpace(after) == ""
}

// trimIndent removes up to n leading spaces from line, as CommonMark does
// from the lines of a block whose fence is indented by n.
func trimIndent(line string, n int) string {
	for ; n > 0 && strings.HasPrefix(line, " "); n-- {
		line = line[1:]
	}
	return line
}

// packageDocs returns the code blocks of the doc comments of every package
// of the module at root, one document per package.
func packageDocs(root string) ([]document, error) {
	var docs []document
	err := walkModule(root, notPackages, func(dir string, d fs.DirEntry) error {
		if !d.IsDir() {
			return nil
		}
		fset := token.NewFileSet()
		pkgs, err := parsePackages(fset, dir, parser.ParseComments)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(dir)
		for _, name := range slices.Sorted(maps.Keys(pkgs)) {
			p, err := doc.NewFromFiles(fset, pkgs[name], "example.com/"+rel)
			if err != nil {
				return err
			}
			if s := docBlocks(rel, p); len(s) > 0 {
				docs = append(docs, document{name: rel, snippets: s})
			}
		}
		return nil
	})
	return docs, err
}

// parsePackages parses the Go files of dir that are not tests, by package
// name, as the go command sees them whatever the build constraints.
func parsePackages(fset *token.FileSet, dir string, mode parser.Mode) (map[string][]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	pkgs := map[string][]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || notPackages(name) {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, mode)
		if err != nil {
			return nil, err
		}
		pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
	}
	return pkgs, nil
}

// docBlocks returns the code blocks of the docs of p that are Go.
func docBlocks(dir string, p *doc.Package) []snippet {
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
			for _, spec := range v.Decl.Specs {
				if s := spec.(*ast.ValueSpec); s.Doc != nil {
					add(identList(s.Names), s.Doc.Text())
				}
			}
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
	return out
}

func identList(ids []*ast.Ident) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.Name
	}
	return strings.Join(names, ", ")
}

func fieldList(fl *ast.FieldList) []*ast.Field {
	if fl == nil {
		return nil
	}
	return fl.List
}

// checkDocs type-checks the snippets of docs and returns what is wrong.
func checkDocs(docs []document) []error {
	known, err := modulePackages(".")
	if err != nil {
		return []error{err}
	}
	fset := token.NewFileSet()
	var pkgs [][]*ast.File
	var errs []error
	for _, d := range docs {
		p, err := docPackages(fset, d, known)
		pkgs = append(pkgs, p...)
		errs = append(errs, err...)
	}
	paths := map[string]bool{}
	for _, files := range pkgs {
		for _, f := range files {
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				paths[p] = true
			}
		}
	}
	exports, err := exportData(slices.Sorted(maps.Keys(paths)))
	if err != nil {
		return append(errs, err)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	})
	conf := types.Config{Importer: imp, Error: func(err error) { errs = append(errs, err) }}
	for _, files := range pkgs {
		_, _ = conf.Check(files[0].Name.Name, fset, files, nil)
	}
	return errs
}

// docPackages returns the packages, as their files, that check the
// snippets of d: one for each whole program, and one of all the others
// with a file that declares the free names they use.
func docPackages(fset *token.FileSet, d document, known map[string]string) ([][]*ast.File, []error) {
	var pkgs [][]*ast.File
	var frags []*fragment
	var errs []error
	for _, s := range d.snippets {
		if isProgram(s.text) {
			f, err := parser.ParseFile(fset, "", lineDirective(s.where)+s.text, parser.SkipObjectResolution)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			pkgs = append(pkgs, []*ast.File{f})
			continue
		}
		fr, err := newFragment(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		frags = append(frags, fr)
	}
	if len(errs) > 0 || len(frags) == 0 {
		return pkgs, errs // the type errors of the fragments would only follow from the parse errors
	}

	// What the fragments declare at package level is theirs; of what they
	// leave undeclared, the names of freeNames are declared for them, and
	// the rest imported if they are names of packages.
	declared := map[string]bool{}
	for _, fr := range frags {
		for name := range fr.file.Scope.Objects {
			declared[name] = true
		}
	}
	names := maps.Clone(freeNames[""])
	maps.Copy(names, freeNames[d.name])
	var free []string
	for _, fr := range frags {
		for _, id := range fr.file.Unresolved {
			if _, ok := names[id.Name]; ok && !declared[id.Name] && !slices.Contains(free, id.Name) {
				free = append(free, id.Name)
			}
		}
	}
	if len(free) > 0 {
		slices.Sort(free)
		var b strings.Builder
		b.WriteString("var (\n")
		for _, name := range free {
			fmt.Fprintf(&b, "\t%s %s\n", name, names[name])
			declared[name] = true
		}
		b.WriteString(")\n")
		fr, err := newFragment(snippet{where: "freeNames[" + strconv.Quote(d.name) + "]:1", text: b.String()})
		if err != nil {
			return pkgs, []error{err}
		}
		frags = append(frags, fr)
	}
	var files []*ast.File
	for _, fr := range frags {
		f, err := fr.finish(fset, declared, known)
		if err != nil {
			return pkgs, []error{err}
		}
		files = append(files, f)
	}
	return append(pkgs, files), nil
}

// isProgram reports whether text is a whole file: it starts with a
// package clause.
func isProgram(text string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", text, parser.PackageClauseOnly)
	return err == nil
}

// lineDirective returns a //line directive that gives the line after it
// the position where, of the form file:line. The file has no name: a
// relative name in a directive would be taken relative to the file's.
func lineDirective(where string) string {
	return "\n//line " + where + "\n"
}

// importPrefix matches an import declaration at the start of a snippet.
var importPrefix = regexp.MustCompile(`(?s)\A\s*(import\s*(?:\(.*?\n\)|"[^"]*"))[ \t]*\n`)

// A fragment is a snippet that is not a whole program, made a file of
// package snippets. A snippet of declarations is the file. A snippet of
// statements is the body of a function of its own, func _(), or func _()
// error when it returns a value; a snippet whose statements are all values
// (composite literals, not calls) has each checked as a value, _ = v.
type fragment struct {
	src     string    // the file, but for the imports that finish adds
	imports bool      // it has an import declaration: it uses exactly those
	wrapped bool      // it is statements, in func _
	file    *ast.File // src parsed with object resolution: what it declares, and leaves undeclared
}

func newFragment(s snippet) (*fragment, error) {
	i := strings.LastIndex(s.where, ":")
	file, line := s.where[:i], 0
	fmt.Sscan(s.where[i+1:], &line)
	directive := func(n int) string { return lineDirective(fmt.Sprintf("%s:%d", file, n)) }

	imports, body := "", s.text
	if m := importPrefix.FindStringSubmatchIndex(s.text); m != nil {
		imports, body = s.text[m[2]:m[3]], s.text[m[1]:]
	}
	bodyLine := line + strings.Count(s.text[:len(s.text)-len(body)], "\n")
	head := "package snippets\n" + directive(line) + imports + "\n"
	fr := &fragment{imports: imports != ""}

	// Declarations, or statements?
	fr.src = head + directive(bodyLine) + body
	if _, err := parser.ParseFile(token.NewFileSet(), "", fr.src, parser.SkipObjectResolution); err != nil {
		fr.wrapped = true
		fr.src = head + "func _() {" + directive(bodyLine) + body + "\n}\n"
		f, err := parser.ParseFile(token.NewFileSet(), "", fr.src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if returnsValue(f.Decls[len(f.Decls)-1].(*ast.FuncDecl).Body) {
			fr.src = head + "func _() error {" + directive(bodyLine) + body + "\nreturn nil\n}\n"
		}
	}
	var err error
	fr.file, err = parser.ParseFile(token.NewFileSet(), "", fr.src, 0)
	return fr, err
}

// finish parses the fragment into fset. Unless it has imports of its own,
// it gets an import of each package of known that it names and that is not
// a name declared.
func (fr *fragment) finish(fset *token.FileSet, declared map[string]bool, known map[string]string) (*ast.File, error) {
	src := fr.src
	if !fr.imports {
		var add []string
		for _, id := range fr.file.Unresolved {
			if p, ok := known[id.Name]; ok && !declared[id.Name] && !slices.Contains(add, p) {
				add = append(add, p)
			}
		}
		slices.Sort(add)
		var b strings.Builder
		for _, p := range add {
			fmt.Fprintf(&b, "import %q\n", p)
		}
		src = strings.Replace(src, "package snippets\n", "package snippets\n"+b.String(), 1)
	}
	f, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if fr.wrapped {
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
	"context": "context", "errors": "errors", "filepath": "path/filepath", "fmt": "fmt", "http": "net/http",
	"httptest": "net/http/httptest", "json": "encoding/json", "log": "log", "os": "os", "slog": "log/slog",
	"testing": "testing", "time": "time",
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
	err = walkModule(root, func(name string) bool {
		return notPackages(name) || name == "internal"
	}, func(dir string, d fs.DirEntry) error {
		if !d.IsDir() {
			return nil
		}
		pkgs, err := parsePackages(token.NewFileSet(), dir, parser.PackageClauseOnly)
		for name := range pkgs {
			if name != "main" {
				known[name] = path.Join(module, filepath.ToSlash(dir)) // a module package wins over a standard one: signal
			}
		}
		return err
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
