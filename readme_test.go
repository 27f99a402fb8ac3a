package termsig_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's "write your own source" snippets are the code of
// example_source_test.go, which compiles and passes termsigtest.TestSource.
func TestWriteYourOwnSourceSnippetsAreCompiled(t *testing.T) {
	code := read(t, "example_source_test.go")
	readme := read(t, "README.md")
	section := readme[strings.Index(readme, "## Write your own source"):]
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, 2)
	require.Len(t, blocks, 2)
	for _, b := range blocks {
		assert.Contains(t, code, b[1], "README.md's snippet is not in example_source_test.go")
	}
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}
