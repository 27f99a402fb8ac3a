// Command modproxy writes a Go module proxy into a directory, holding
// modules of this working tree at versions not tagged yet, so that
// `go install path@version` can be tried before the tag exists:
//
//	go run ./modproxy -o DIR MODDIR@VERSION...
//	GOPROXY=file://DIR,$(go env GOPROXY) GONOSUMDB=github.com/termsig go install github.com/termsig/termsig/cmd/termsig@VERSION
//
// Each MODDIR is a directory holding a go.mod; the same directory may be
// given at several versions. The layout is the one `go help goproxy`
// describes: $module/@v/list, and $version.info, .mod and .zip, the zip
// made by golang.org/x/mod/zip, so that what would not be in a module
// zip (nested modules, vendor directories, symbolic links) is not.
//
// The files are those of the working tree, uncommitted changes included,
// less what git ignores (dist/, built binaries): in a git work tree, the
// files that `git ls-files --cached --others --exclude-standard` names;
// elsewhere, those that zip.CreateFromDir takes.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	out := flag.String("o", "", "the proxy's `directory`, created if missing")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: modproxy -o DIR MODDIR@VERSION...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, arg := range flag.Args() {
		i := strings.LastIndex(arg, "@")
		if i < 0 {
			fmt.Fprintf(os.Stderr, "modproxy: %q: want MODDIR@VERSION\n", arg)
			os.Exit(2)
		}
		m, err := publish(*out, arg[:i], arg[i+1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "modproxy:", err)
			os.Exit(1)
		}
		fmt.Printf("modproxy: %s@%s from %s\n", m.Path, m.Version, arg[:i])
	}
}

// publish writes the module in dir into the proxy at proxy as version.
func publish(proxy, dir, version string) (module.Version, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return module.Version{}, err
	}
	m := module.Version{Path: modfile.ModulePath(gomod), Version: version}
	if m.Path == "" {
		return m, fmt.Errorf("%s/go.mod: no module line", dir)
	}
	// Check also asks that a vN module be published at vN.x.y only.
	if err := module.Check(m.Path, m.Version); err != nil {
		return m, err
	}
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return m, err
	}
	escVersion, err := module.EscapeVersion(m.Version)
	if err != nil {
		return m, err
	}
	var zip bytes.Buffer
	files, err := gitFiles(dir)
	switch {
	case errors.Is(err, errNotGit):
		err = modzip.CreateFromDir(&zip, m, dir)
	case err == nil:
		err = modzip.Create(&zip, m, files)
	}
	if err != nil {
		return m, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return m, err
	}

	at := filepath.Join(proxy, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return m, err
	}
	for ext, data := range map[string][]byte{".info": info, ".mod": gomod, ".zip": zip.Bytes()} {
		if err := os.WriteFile(filepath.Join(at, escVersion+ext), data, 0o644); err != nil {
			return m, err
		}
	}
	return m, addToList(filepath.Join(at, "list"), m.Version)
}

// addToList adds version to the proxy's list of a module's versions.
func addToList(list, version string) error {
	b, err := os.ReadFile(list)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(b))
	if slices.Contains(versions, version) {
		return nil
	}
	versions = append(versions, version)
	return os.WriteFile(list, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// errNotGit is gitFiles' error for a directory outside a git work tree.
var errNotGit = errors.New("not in a git work tree")

// gitFiles lists the files of the working tree under dir that git does not
// ignore. Create leaves out those of nested modules.
func gitFiles(dir string) ([]modzip.File, error) {
	if exec.Command("git", "-C", dir, "rev-parse", "--is-inside-work-tree").Run() != nil {
		return nil, errNotGit
	}
	cmd := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %v: %s", dir, err, stderr.Bytes())
	}
	var files []modzip.File
	for rel := range strings.SplitSeq(string(out), "\x00") {
		if rel == "" {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(rel))
		info, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not committed yet
		}
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: path, slashPath: rel, info: info})
	}
	return files, nil
}

// file is a file of the working tree, as golang.org/x/mod/zip takes it.
type file struct {
	path, slashPath string
	info            fs.FileInfo
}

func (f file) Path() string                 { return f.slashPath }
func (f file) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.path) }
