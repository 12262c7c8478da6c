// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MetricsText and MetricsHandler: the exposition of two electors on a file
// lock names the leader, its term and its renewals, and is served over HTTP
// with the Prometheus content type.
func TestMetricsTextAndHandler(t *testing.T) {
	lock := "file://" + filepath.Join(t.TempDir(), "lock.json")
	mk := func(id string) *S3Elector {
		e, err := NewS3Elector(S3ElectorOptions{Config: &ElectorConfig{
			ServerID: id, LockfilePath: lock,
			LeaderTimeout: 1500 * time.Millisecond, RenewInterval: 300 * time.Millisecond,
			RenewDeadline: 900 * time.Millisecond, FrequentInterval: 200 * time.Millisecond,
			InfrequentInterval: 600 * time.Millisecond,
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Stop() })
		return e
	}
	a, b := mk("a"), mk("b")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitForLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	text, err := MetricsText(a, b, a)
	if err != nil {
		t.Fatal(err)
	}
	la := `{lock="` + lock + `",id="a"}`
	lb := `{lock="` + lock + `",id="b"}`
	for _, want := range []string{
		"s3lect_leader" + la + " 1\n", "s3lect_leader" + lb + " 0\n",
		"# TYPE s3lect_store_request_duration_seconds histogram\n",
		`s3lect_leadership_transitions_total{lock="` + lock + `",id="a",reason="acquired"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "# TYPE s3lect_leader gauge") != 1 {
		t.Errorf("one TYPE line per family")
	}
	srv := httptest.NewServer(MetricsHandler(a, b))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != MetricsContentType ||
		!strings.Contains(string(body), "s3lect_leader"+la+" 1") {
		t.Fatalf("GET: %d %q %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, err = http.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	if _, err := MetricsText(nil); err == nil {
		t.Fatal("a nil elector must be an error")
	}
}
