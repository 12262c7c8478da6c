// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// buildEnv is this process's environment without the variables that decide
// whether cgo is on, plus extra.
func buildEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "CGO_ENABLED", "CC", "CC_FOR_TARGET", "GOOS", "GOARCH", "GOFLAGS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// checkNoCgoBuild runs go build on this package with env and checks that it
// fails with the one explanation of nocgo.go, not with errors about
// identifiers the cgo files declare.
func checkNoCgoBuild(t *testing.T, env []string) {
	t.Helper()
	cmd := exec.Command(goTool(t), "build", "-o", os.DevNull, ".")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err == nil {
		t.Fatalf("go build without cgo succeeded; it must fail with an explanation:\n%s", text)
	}
	for _, want := range []string{"requires cgo", "CGO_ENABLED=1", "nocgo.go"} {
		if !strings.Contains(text, want) {
			t.Errorf("go build without cgo: the output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "undefined:") {
		t.Errorf("go build without cgo reports undefined identifiers instead of only the explanation:\n%s", text)
	}
}

func TestBuildWithoutCgoSaysCgoIsRequired(t *testing.T) {
	checkNoCgoBuild(t, buildEnv("CGO_ENABLED=0"))
}

func TestCrossBuildWithoutCCSaysCgoIsRequired(t *testing.T) {
	goos := "windows"
	if runtime.GOOS == goos {
		goos = "linux"
	}
	env := buildEnv("GOOS="+goos, "GOARCH=amd64")
	// A cross build has cgo off by default unless a C compiler for the
	// target is configured (CC, or CGO_ENABLED in the go env file).
	q := exec.Command(goTool(t), "env", "CGO_ENABLED")
	q.Env = env
	if v, err := q.Output(); err != nil || strings.TrimSpace(string(v)) != "0" {
		t.Skipf("cgo is not off by default for GOOS=%s here (go env CGO_ENABLED: %q)", goos, v)
	}
	checkNoCgoBuild(t, env)
}
