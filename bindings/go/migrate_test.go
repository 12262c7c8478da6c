// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The migration example (examples/migrate), a Go s3lect program with only
// its import changed, is the program docs/compat.md shows, builds against
// this package, and runs: two nodes on one lock directory, one leads and
// serves the leadership endpoint over HTTPS, SIGTERM makes it exit cleanly
// (status 0) and hands leadership to the other at once, SIGINT ends that one.

const migrateProgram = "examples/migrate/main.go"

func TestMigrateExampleIsInCompatDoc(t *testing.T) {
	src, err := os.ReadFile(migrateProgram)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/compat.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, src) {
		t.Fatalf("docs/compat.md does not contain the text of %s: copy the file into its Go code block", migrateProgram)
	}
	const ours = `s3lect "github.com/s3lect/s3lect/bindings/go"`
	if bytes.Count(src, []byte("github.com/s3lect/s3lect/bindings/go")) != 1 || !bytes.Contains(src, []byte(ours)) {
		t.Fatalf("%s must import this package exactly once, as %s", migrateProgram, ours)
	}
	if !bytes.Contains(doc, []byte(`"github.com/nadrama-com/s3lect"`)) {
		t.Fatal("docs/compat.md does not show the Go s3lect import line the program replaces")
	}
}

// goTool returns the go command that runs this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command in PATH or in GOROOT (%s): %v", runtime.GOROOT(), err)
	}
	return p
}

// buildGo runs `go build` in dir with a time limit.
func buildGo(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(t), append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v in %s: %v\n%s", args, dir, err, out)
	}
}

// node is a running copy of the example program.
type node struct {
	name string
	addr string // the leadership endpoint (HTTPS)
	ops  string // the operations server (HTTP)
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, after done
}

func (n *node) log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.out.String()
}

func (n *node) count(s string) int { return strings.Count(n.log(), s) }

// logTime returns the time of the first log line containing s.
func (n *node) logTime(t *testing.T, s string) time.Time {
	t.Helper()
	for _, line := range strings.Split(n.log(), "\n") {
		if !strings.Contains(line, s) || !strings.HasPrefix(line, "time=") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("%s: bad time in %q: %v", n.name, line, err)
		}
		return at
	}
	t.Fatalf("%s never logged %q", n.name, s)
	return time.Time{}
}

func startNode(t *testing.T, bin, name, lockDir, cert, key string) *node {
	t.Helper()
	n := &node{name: name, addr: freeAddr(t), ops: freeAddr(t), done: make(chan struct{})}
	n.cmd = exec.Command(bin, "-id", name, "-lock-dir", lockDir, "-addr", n.addr,
		"-tls-cert", cert, "-tls-key", key, "-ops-addr", n.ops)
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			n.mu.Lock()
			n.out.WriteString(sc.Text() + "\n")
			n.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		n.err = n.cmd.Wait()
		close(n.done)
	}()
	t.Cleanup(func() {
		select {
		case <-n.done:
		default:
			_ = n.cmd.Process.Kill()
			<-n.done
		}
		t.Logf("%s's log:\n%s", name, n.log())
	})
	return n
}

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (n *node) waitLog(t *testing.T, within time.Duration, s string, times int) {
	t.Helper()
	waitUntil(t, within, n.name+" logs "+s, func() bool {
		select {
		case <-n.done:
			t.Fatalf("%s exited (%v) before logging %q:\n%s", n.name, n.err, s, n.log())
		default:
		}
		return n.count(s) >= times
	})
}

func (n *node) signalAndWait(t *testing.T, sig os.Signal, within time.Duration) {
	t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v of %v", n.name, within, sig)
	}
	if n.err != nil {
		t.Fatalf("%s exited with %v after %v, want status 0", n.name, n.err, sig)
	}
	if n.count("controller: shut down cleanly") != 1 || n.count("controller: work stopped") < 1 {
		t.Fatalf("%s exited without the clean-shutdown log lines", n.name)
	}
}

func TestMigrateExampleRuns(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "controller")
	buildGo(t, ".", nil, "-o", bin, "./examples/migrate")

	pki := newTestPKI(t)
	cert, key := filepath.Join(tmp, "cert.pem"), filepath.Join(tmp, "key.pem")
	if err := os.WriteFile(cert, pki.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pki.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	lockDir := filepath.Join(tmp, "locks")
	client := pki.client()
	defer client.CloseIdleConnections()

	a := startNode(t, bin, "a", lockDir, cert, key)
	a.waitLog(t, 30*time.Second, "controller: leading, starting work", 1)
	a.waitLog(t, 10*time.Second, "controller: reconciled", 2)
	if st, _, rec, raw := get(t, client, "GET", "https://"+a.addr+healthPath); st != http.StatusOK || rec.LeaderID != "a" {
		t.Fatalf("a's leadership endpoint: %d %s, want 200 naming a", st, raw)
	}
	// The same endpoint through NewLeadershipHandler on the program's own
	// server, and its status page.
	plain := &http.Client{Timeout: 10 * time.Second}
	defer plain.CloseIdleConnections()
	waitUntil(t, 30*time.Second, "a's operations server is up", func() bool {
		resp, err := plain.Get("http://" + a.ops + "/status")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	if st, _, rec, raw := get(t, plain, "GET", "http://"+a.ops+healthPath); st != http.StatusOK || rec.LeaderID != "a" || rec.ETag == "" {
		t.Fatalf("a's operations server %s: %d %s, want 200 naming a", healthPath, st, raw)
	}
	var status LeadershipStatus
	if st, _, _, raw := get(t, plain, "GET", "http://"+a.ops+"/status"); st != http.StatusOK ||
		json.Unmarshal(raw, &status) != nil || !status.IsLeader || status.ServerID != "a" || status.LeaderID != "a" {
		t.Fatalf("a's /status: %d %s", st, raw)
	}

	b := startNode(t, bin, "b", lockDir, cert, key)
	// b follows: both its endpoints answer 404 once they are up.
	for _, u := range []string{"https://" + b.addr + healthPath, "http://" + b.ops + healthPath} {
		waitUntil(t, 30*time.Second, u+" answers", func() bool {
			resp, err := client.Get(u)
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("b's %s: %d while a leads, want 404", u, resp.StatusCode)
			}
			return true
		})
	}
	if b.count("controller: leading") != 0 {
		t.Fatal("b leads while a does")
	}

	a.signalAndWait(t, syscall.SIGTERM, 20*time.Second)
	if a.count(`msg="Lost leadership"`) != 1 || a.count("reason=stopped") != 1 {
		t.Fatal("a did not log giving up leadership on Stop (reason=stopped)")
	}
	b.waitLog(t, 20*time.Second, "controller: leading, starting work", 1)
	// Never two copies of the work: a stopped before b started (one host, one clock).
	aStopped, bLeading := a.logTime(t, "controller: work stopped"), b.logTime(t, "controller: leading")
	if !aStopped.Before(bLeading) {
		t.Fatalf("b started work at %v, before a stopped at %v", bLeading, aStopped)
	}
	if st, _, rec, raw := get(t, client, "GET", "https://"+b.addr+healthPath); st != http.StatusOK || rec.LeaderID != "b" {
		t.Fatalf("b's leadership endpoint: %d %s, want 200 naming b", st, raw)
	}
	b.signalAndWait(t, syscall.SIGINT, 20*time.Second)
}

// examples/apicheck names every exported identifier of Go s3lect c45cfbd
// with Go s3lect's types; it builds and runs against this package.
func TestAPICheckBuildsAndRuns(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "apicheck")
	buildGo(t, ".", nil, "-o", bin, "./examples/apicheck")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "API present; not found is ErrStorageNotFound: true") {
		t.Fatalf("apicheck: %v\n%s", err, out)
	}
}

// With a Go s3lect checkout (GOS3LECT_SRC: the path of a checkout of
// github.com/nadrama-com/s3lect; by default ../shared/gos3lect beside the
// repository, where it exists), the same program texts with the Go s3lect
// import build against Go s3lect itself: the migration example is a Go
// s3lect program, not one written for this package, and apicheck's names
// and types are Go s3lect's.
func TestExamplesBuildAgainstGoS3lect(t *testing.T) {
	abs := gos3lectSource(t)
	for _, prog := range []string{migrateProgram, "examples/apicheck/main.go"} {
		t.Run(filepath.Base(filepath.Dir(prog)), func(t *testing.T) {
			src, err := os.ReadFile(prog)
			if err != nil {
				t.Fatal(err)
			}
			const ours = `s3lect "github.com/s3lect/s3lect/bindings/go"`
			theirs := bytes.Replace(src, []byte(ours), []byte(`"github.com/nadrama-com/s3lect"`), 1)
			if bytes.Equal(theirs, src) {
				t.Fatalf("%s does not import %s", prog, ours)
			}
			dir := t.TempDir()
			gomod := "module examplecheck\n\ngo 1.23.1\n\nrequire github.com/nadrama-com/s3lect v0.0.0\n\n" +
				"replace github.com/nadrama-com/s3lect => " + abs + "\n"
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "main.go"), theirs, 0o644); err != nil {
				t.Fatal(err)
			}
			buildGo(t, dir, []string{"GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off"}, "-o", filepath.Join(dir, "prog"), ".")
		})
	}
}
