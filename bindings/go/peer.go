package s3lect

import (
	"net/http"
	"strconv"
)

// NewLeadershipHandler returns an http.Handler that serves the peer
// leadership endpoint from the application's own HTTP server, with the same
// answers as libs3lect's built-in HTTPS server (see PeerResponse):
//
//	mux := http.NewServeMux()
//	mux.Handle("/health/leadership", s3lect.NewLeadershipHandler(elector))
//
// GET and HEAD are answered by libs3lect from the request's path and query
// (r.URL.RequestURI()), so mount it at the elector's PeerHealthPath, the
// path followers request; other paths get 404. Every answer is JSON with
// Cache-Control: no-store. Other methods get 405 with "Allow: GET, HEAD".
// A long poll (?wait=ms&etag=...) holds the handler's goroutine until the
// leader renews, leadership ends or wait passes (at most 60 s), even if the
// client goes away.
//
// libs3lect's own server also runs when PeerMode is on and PeerCert and
// PeerKey are set; this handler is for serving the endpoint yourself, e.g.
// behind your own TLS configuration or next to your other endpoints.
func NewLeadershipHandler(e *S3Elector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeJSON(w, r, http.StatusMethodNotAllowed,
				[]byte(`{"error":"method not allowed: use GET or HEAD"}`))
			return
		}
		status, body, err := e.PeerResponse(r.Method, r.URL.RequestURI())
		if err != nil {
			writeJSON(w, r, http.StatusServiceUnavailable, []byte(`{"error":"temporarily unavailable"}`))
			return
		}
		writeJSON(w, r, status, body)
	})
}

func writeJSON(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
