package docscheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeGoCompiles: every Go code block of README.md compiles against
// this module (issue #42): a whole declaration as it is, a fragment inside
// a function that gives it an engine e, a ctx and a run function.
func TestReadmeGoCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go code block")
	}
	var src strings.Builder
	src.WriteString(`package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
)

var (
	_ = context.Background
	_ = tls.VersionTLS12
	_ = x509.NewCertPool
	_ = errors.Is
	_ = fmt.Println
	_ = os.Getenv
	_ = time.Second
	_ = conn.Dial
	_ = engine.New
)

func main() {}
`)
	for i, b := range blocks {
		code := b[1]
		if decl := regexp.MustCompile(`(?m)^func `).MatchString(code); decl {
			src.WriteString("\n" + code)
			continue
		}
		// A fragment: its own function, its variables used.
		src.WriteString("\nfunc readmeBlock" + string(rune('A'+i)) + "(ctx context.Context, e *engine.Engine, run func(context.Context)) error {\n" + code)
		for _, v := range regexp.MustCompile(`(?m)^\s*(\w+)(?:, (\w+))? :?= `).FindAllStringSubmatch(code, -1) {
			for _, name := range v[1:] {
				if name != "" && name != "_" {
					src.WriteString("_ = " + name + "\n")
				}
			}
		}
		src.WriteString("return nil\n}\n")
	}
	dir, err := os.MkdirTemp(".", "_readme") // "_": outside ./... patterns
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "vet", "./"+filepath.Base(dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("README.md's Go blocks do not compile (go vet): %v\n%s\n--- the program:\n%s", err, out, src.String())
	}
}
