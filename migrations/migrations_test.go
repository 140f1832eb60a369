package migrations

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// Every migration exists for both dialects, with the same version and name: the two databases
// are first-class, and a change made to one only is a bug waiting for the other.
func TestDialectsHaveTheSameMigrations(t *testing.T) {
	for _, set := range []Set{Shop, Gateway} {
		names := func(dialect string) []string {
			entries, err := fs.ReadDir(files, string(set)+"/"+dialect)
			if err != nil {
				t.Fatalf("%s/%s: %v", set, dialect, err)
			}
			var out []string
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".sql") {
					out = append(out, e.Name())
				}
			}
			return out
		}
		pg, lite := names("postgres"), names("sqlite")
		if len(pg) == 0 || !slices.Equal(pg, lite) {
			t.Errorf("%s: postgres has %v, sqlite has %v; want the same non-empty list", set, pg, lite)
		}
	}
}
