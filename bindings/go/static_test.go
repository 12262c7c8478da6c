// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A program built with the bundled sources has libs3lect inside it, and so
// does one built with the tag s3lect_system against the build tree (the
// uninstalled s3lect.pc names libs3lect.a): it needs no libs3lect.so and no
// rpath into the build tree, so moving or deleting the build tree cannot
// break it ("libs3lect.so.0: cannot open shared object file").
func TestProgramsNeedNoLibs3lectSo(t *testing.T) {
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		t.Skip("ldd is not available to inspect the program's dependencies")
	}
	bin := filepath.Join(t.TempDir(), "migrate")
	args := []string{"build", "-o", bin}
	if linkedSystem {
		args = append(args, "-tags", "s3lect_system")
	}
	build := exec.Command("go", append(args, "./examples/migrate")...)
	build.Env = os.Environ()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(ldd, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("ldd: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "libs3lect") {
		t.Fatalf("the program needs libs3lect.so (with a build tree whose s3lect.pc changed, "+
			"a stale Go build cache can do this: go clean -cache):\n%s", out)
	}
	if strings.Contains(string(out), "not found") {
		t.Fatalf("the program misses a library:\n%s", out)
	}
	readelf, err := exec.LookPath("readelf")
	if err == nil {
		dyn, _ := exec.Command(readelf, "-d", bin).CombinedOutput()
		if strings.Contains(string(dyn), "RPATH") || strings.Contains(string(dyn), "RUNPATH") {
			t.Fatalf("the program has an rpath into the build tree:\n%s", dyn)
		}
	}
}
