// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const healthPath = "/health/leadership"

// peerRecord is the part of the leadership endpoint's 200 body the tests read.
type peerRecord struct {
	LeaderID   string `json:"leaderID"`
	LeaderAddr string `json:"leaderAddr"`
	Term       int64  `json:"term"`
	ETag       string `json:"etag"`
	Error      string `json:"error"`
}

func get(t *testing.T, c *http.Client, method, u string) (int, http.Header, peerRecord, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, u, err)
	}
	var rec peerRecord
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %q", method, u, err, raw)
		}
	}
	return resp.StatusCode, resp.Header, rec, raw
}

// The handler answers from libs3lect: 200 with the record while leading,
// 404 when not, 405 for other methods; a long poll ends on renewal.
func TestLeadershipHandler(t *testing.T) {
	log := testLogger(t)
	cfg := fileConfig(t, "", "h1")
	cfg.ServerAddr = "127.0.0.1:8443"
	el := newElector(t, log, cfg, nil)
	srv := httptest.NewServer(NewLeadershipHandler(el, log))
	defer srv.Close()
	c := srv.Client()
	c.Timeout = 30 * time.Second
	u := srv.URL + healthPath

	if st, _, rec, raw := get(t, c, "GET", u); st != http.StatusNotFound || rec.Error == "" {
		t.Fatalf("before Start: %d %s, want 404 with an error", st, raw)
	}
	start(t, el)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := el.WaitForLeadership(ctx); err != nil {
		t.Fatal(err)
	}

	st, hdr, rec, raw := get(t, c, "GET", u)
	if st != http.StatusOK {
		t.Fatalf("GET while leading: %d %s", st, raw)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if rec.LeaderID != "h1" || rec.LeaderAddr != "127.0.0.1:8443" || rec.ETag == "" ||
		rec.Term != el.Term() || rec.Term < 1 {
		t.Fatalf("GET while leading: record %+v (term now %d)", rec, el.Term())
	}

	if st, _, _, raw := get(t, c, "HEAD", u); st != http.StatusOK || len(raw) != 0 {
		t.Fatalf("HEAD: %d with %d body bytes, want 200 and none", st, len(raw))
	}
	st, hdr, rec, _ = get(t, c, "POST", u)
	if st != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, HEAD" || rec.Error == "" {
		t.Fatalf("POST: %d, Allow %q, error %q; want 405, \"GET, HEAD\"", st, hdr.Get("Allow"), rec.Error)
	}
	if st, _, _, raw := get(t, c, "GET", srv.URL+"/elsewhere"); st != http.StatusNotFound {
		t.Fatalf("GET /elsewhere: %d %s, want 404", st, raw)
	}
	if st, _, _, raw := get(t, c, "GET", u+"?wait=soon"); st != http.StatusBadRequest {
		t.Fatalf("GET ?wait=soon: %d %s, want 400", st, raw)
	}

	// A long poll with the current etag returns once the leader renews (every 500ms).
	_, _, now, _ := get(t, c, "GET", u)
	begin := time.Now()
	st, _, next, raw := get(t, c, "GET", u+"?wait=20000&etag="+url.QueryEscape(now.ETag))
	if st != http.StatusOK || next.ETag == now.ETag {
		t.Fatalf("long poll: %d %s; want 200 with an etag other than %s", st, raw, now.ETag)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("long poll took %v; renewals are %v apart", took, testRenew)
	}

	if err := el.Stop(); err != nil {
		t.Fatal(err)
	}
	if st, _, _, raw := get(t, c, "GET", u); st != http.StatusNotFound {
		t.Fatalf("after Stop: %d %s, want 404", st, raw)
	}
}

func TestLeadershipHandlerOnFollower(t *testing.T) {
	log := testLogger(t)
	lock := t.TempDir() + "/lock.json"
	a := newElector(t, log, fileConfig(t, lock, "a"), nil)
	b := newElector(t, log, fileConfig(t, lock, "b"), nil)
	start(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.WaitForLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	start(t, b)
	waitUntil(t, 10*time.Second, "b sees a as leader", func() bool { return b.LeaderID() == "a" })
	sa, sb := httptest.NewServer(NewLeadershipHandler(a, log)), httptest.NewServer(NewLeadershipHandler(b, log))
	defer sa.Close()
	defer sb.Close()
	if st, _, rec, raw := get(t, sb.Client(), "GET", sb.URL+healthPath); st != http.StatusNotFound ||
		!strings.Contains(rec.Error, "not the leader") {
		t.Fatalf("follower: %d %s, want 404 \"not the leader\"", st, raw)
	}
	if st, _, rec, raw := get(t, sa.Client(), "GET", sa.URL+healthPath); st != http.StatusOK || rec.LeaderID != "a" {
		t.Fatalf("leader: %d %s", st, raw)
	}
}

// testPKI is a throwaway CA and a certificate for 127.0.0.1 (server and
// client use), made with crypto/x509.
type testPKI struct {
	caPEM, certPEM, keyPEM []byte
	pool                   *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "s3lect go test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(48 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		pool:    x509.NewCertPool(),
	}
	p.pool.AddCert(ca)
	return p
}

func (p *testPKI) client() *http.Client {
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}},
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A certificate needs its key and a CA; ServerAddr is optional and no
// certificate at all is zero-config (peer_zeroconf_test.go).
func TestPeerModeNeedsItsSettings(t *testing.T) {
	p := newTestPKI(t)
	cfg := fileConfig(t, "", "n")
	cfg.PeerMode = true
	cfg.PeerCACert, cfg.PeerCert, cfg.PeerKey = p.caPEM, p.certPEM, p.keyPEM
	newElector(t, testLogger(t), cfg, nil) // certificates and no ServerAddr: valid
	cases := []struct {
		name string
		edit func(c *ElectorConfig)
		want string
	}{
		{"no CA", func(c *ElectorConfig) { c.PeerCACert = nil }, "PeerCACert"},
		{"no key", func(c *ElectorConfig) { c.PeerKey = nil }, "both PeerCert and PeerKey"},
		{"no certificate", func(c *ElectorConfig) { c.PeerCert = nil }, "both PeerCert and PeerKey"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fileConfig(t, "", "n")
			cfg.PeerMode, cfg.ServerAddr = true, "127.0.0.1:1"
			cfg.PeerCACert, cfg.PeerCert, cfg.PeerKey = p.caPEM, p.certPEM, p.keyPEM
			tc.edit(cfg)
			_, err := NewS3Elector(S3ElectorOptions{Config: cfg})
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewS3Elector: %v; want an invalid-config error naming %s", err, tc.want)
			}
		})
	}
}

// The built-in HTTPS endpoint starts when EnablePeerMode is called on a
// running elector that has a certificate and key.
func TestEnablePeerModeWhileRunning(t *testing.T) {
	p := newTestPKI(t)
	log := testLogger(t)

	noAddr := newElector(t, log, fileConfig(t, "", "noaddr"), nil)
	start(t, noAddr)
	if err := noAddr.EnablePeerMode(p.caPEM); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "ServerAddr") {
		t.Fatalf("EnablePeerMode without ServerAddr: %v", err)
	}

	cfg := fileConfig(t, "", "late")
	cfg.ServerAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg.PeerListen = "127.0.0.1:0"
	cfg.PeerCert, cfg.PeerKey = p.certPEM, p.keyPEM
	el := newElector(t, log, cfg, nil)
	start(t, el)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := el.WaitForLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	if port := el.PeerPort(); port != 0 {
		t.Fatalf("PeerPort %d before peer mode, want 0", port)
	}
	if err := el.EnablePeerMode(nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("EnablePeerMode(nil): %v, want an invalid-config error", err)
	}
	if err := el.EnablePeerMode(p.caPEM); err != nil {
		t.Fatalf("EnablePeerMode while running: %v", err)
	}
	if got := el.GetConfig(); !got.PeerMode || string(got.PeerCACert) != string(p.caPEM) {
		t.Fatalf("GetConfig after EnablePeerMode: PeerMode %v", got.PeerMode)
	}
	waitUntil(t, 10*time.Second, "the endpoint listens", func() bool { return el.PeerPort() != 0 })
	u := fmt.Sprintf("https://127.0.0.1:%d%s", el.PeerPort(), healthPath)
	if st, _, rec, raw := get(t, p.client(), "GET", u); st != http.StatusOK || rec.LeaderID != "late" {
		t.Fatalf("GET %s: %d %s", u, st, raw)
	}
	if err := el.Stop(); err != nil {
		t.Fatal(err)
	}
	if port := el.PeerPort(); port != 0 {
		t.Fatalf("PeerPort %d after Stop, want 0", port)
	}
}

// Two peer-mode electors on MinIO with real TLS: one leader, whose endpoint
// serves its record; the follower settles into the stable state (long-polling
// the leader) and takes over at once when the leader stops.
func TestPeerModePairOnMinIO(t *testing.T) {
	s := needS3(t)
	p := newTestPKI(t)
	log := testLogger(t)
	key := uniqueKey(t)
	var els []*S3Elector
	for _, id := range []string{"peer-a", "peer-b"} {
		cfg := s3Config(s, key, id)
		cfg.ServerAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cfg.PeerMode = true
		cfg.PeerCACert, cfg.PeerCert, cfg.PeerKey = p.caPEM, p.certPEM, p.keyPEM
		els = append(els, newElector(t, log, cfg, nil))
	}
	start(t, els...)
	for _, el := range els {
		c := el.GetConfig()
		want := c.ServerAddr[strings.LastIndexByte(c.ServerAddr, ':')+1:]
		waitUntil(t, 10*time.Second, c.ServerID+" listens on its ServerAddr port", func() bool {
			return fmt.Sprint(el.PeerPort()) == want
		})
	}
	leader := waitOneLeader(t, els, 20*time.Second)
	follower := els[0]
	if follower == leader {
		follower = els[1]
	}
	waitUntil(t, 20*time.Second, "the follower becomes stable", func() bool {
		return follower.GetLeadershipStatus().State == "follower_stable"
	})
	if ls := leaders(els); len(ls) != 1 || ls[0] != leader {
		t.Fatalf("leaders now %v", ids(ls))
	}
	c := p.client()
	lu := fmt.Sprintf("https://127.0.0.1:%d%s", leader.PeerPort(), healthPath)
	st, _, rec, raw := get(t, c, "GET", lu)
	if st != http.StatusOK || rec.LeaderID != leader.GetConfig().ServerID || rec.Term != leader.Term() {
		t.Fatalf("leader's endpoint: %d %s", st, raw)
	}
	fu := fmt.Sprintf("https://127.0.0.1:%d%s", follower.PeerPort(), healthPath)
	if st, _, _, raw := get(t, c, "GET", fu); st != http.StatusNotFound {
		t.Fatalf("follower's endpoint: %d %s, want 404", st, raw)
	}

	// Concurrent readers of the endpoint and the state while the leader
	// stops (for the race detector).
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _, _ = leader.PeerResponse("GET", healthPath)
				_ = follower.PeerPort()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	term := leader.Term()
	begin := time.Now()
	if err := leader.Stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the follower takes over", follower.IsLeader)
	took := time.Since(begin)
	close(stop)
	wg.Wait()
	if took > testLease {
		t.Fatalf("handover took %v, longer than the lease %v: the release was not noticed", took, testLease)
	}
	if follower.Term() <= term {
		t.Fatalf("term %d after the handover, was %d", follower.Term(), term)
	}
	if leader.PeerPort() != 0 {
		t.Fatalf("the stopped leader still serves on port %d", leader.PeerPort())
	}
	fu = fmt.Sprintf("https://127.0.0.1:%d%s", follower.PeerPort(), healthPath)
	if st, _, rec, raw := get(t, c, "GET", fu); st != http.StatusOK || rec.LeaderID != follower.GetConfig().ServerID {
		t.Fatalf("new leader's endpoint: %d %s", st, raw)
	}
}
