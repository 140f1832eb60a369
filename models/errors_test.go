package models_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"checkoutlab/models"
)

// TestErrorTableListsTheCatalogue: docs/api.md's error table is the API's promise; it lists
// exactly the codes of the catalogue, no more and no fewer.
func TestErrorTableListsTheCatalogue(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Errors\n")
	if !ok {
		t.Fatal(`docs/api.md has no "## Errors" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([a-z_]+)`")
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !regexp.MustCompile(`^\s*\d{3}\s*$`).MatchString(cells[1]) {
			continue // not a row of the table
		}
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			listed[m[1]] = true
		}
	}
	for _, c := range models.Codes() {
		if !listed[c] {
			t.Errorf("code %s: in the catalogue, missing from docs/api.md's error table", c)
		}
		delete(listed, c)
	}
	for c := range listed {
		t.Errorf("code %s: in docs/api.md's error table, not in the catalogue (models/errors.go)", c)
	}
}

// TestNoCodeOutsideTheCatalogue: an error code is declared in models/errors.go and nowhere
// else; other code takes its error from there (Msgf, Wrap and WithFields keep the code). The
// fake gateway is another company, with codes of its own, and is not looked at.
func TestNoCodeOutsideTheCatalogue(t *testing.T) {
	minted := regexp.MustCompile(`\bCode:\s*"|Errorf\(\s*(models\.)?Kind\w+,\s*"`)
	skip := []string{"fakegateway", filepath.Join("cmd", "fakegateway")}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		if d.IsDir() && (slices.Contains(skip, rel) || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			rel == filepath.Join("models", "errors.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if minted.MatchString(line) {
				t.Errorf("%s:%d mints an error code: declare it in models/errors.go\n\t%s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
