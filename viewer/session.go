package viewer

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Browser sessions. A browser presents its credential once, through the
// login form; the viewer keeps who it is in memory under a random session
// id, which the browser keeps in an HttpOnly, SameSite=Strict cookie
// (Secure over TLS): no script can read it and no other site's page can
// send it. The sessions are this process's: behind a load balancer, a
// browser signs in again at a replica that does not know it.

// cookieName is the session cookie's name.
const cookieName = "orchestra_session"

// session is one signed-in browser.
type session struct {
	id      Identity
	expires time.Time
}

// sessions are the signed-in browsers, by the SHA-256 of their session id.
type sessions struct {
	mu  sync.Mutex
	m   map[[sha256.Size]byte]session
	max int
	ttl time.Duration
	now func() time.Time
}

func newSessions(max int, ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{m: map[[sha256.Size]byte]session{}, max: max, ttl: ttl, now: now}
}

// start keeps a new session of id and returns its cookie value and expiry.
// At the cap, expired sessions go first, then the one that expires soonest.
func (s *sessions) start(id Identity) (string, time.Time) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("viewer: reading random bytes: " + err.Error())
	}
	value := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.now()
	expires := now.Add(s.ttl)
	if !id.Expires.IsZero() && id.Expires.Before(expires) {
		expires = id.Expires
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		var soonest [sha256.Size]byte
		var at time.Time
		for k, ss := range s.m {
			if !ss.expires.After(now) {
				delete(s.m, k)
				continue
			}
			if at.IsZero() || ss.expires.Before(at) {
				soonest, at = k, ss.expires
			}
		}
		if len(s.m) >= s.max {
			delete(s.m, soonest)
		}
	}
	s.m[hashKey(value)] = session{id: id, expires: expires}
	return value, expires
}

// hashKey is the key a session id is kept under: a process's memory holds
// no session id a cookie could be made from.
func hashKey(value string) [sha256.Size]byte { return sha256.Sum256([]byte(value)) }

// get returns the identity of r's session cookie, if it names a live
// session.
func (s *sessions) get(r *http.Request) (Identity, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || len(c.Value) > 64 {
		return Identity{}, false
	}
	key := hashKey(c.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[key]
	if !ok {
		return Identity{}, false
	}
	if !ss.expires.After(s.now()) {
		delete(s.m, key)
		return Identity{}, false
	}
	return ss.id, true
}

// end forgets r's session.
func (s *sessions) end(r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		delete(s.m, hashKey(c.Value))
		s.mu.Unlock()
	}
}

// Bounds of the login form.
const (
	maxLoginBody  = 16 << 10 // bytes of the form
	maxCredential = 8 << 10  // bytes of the token
	maxNext       = 1024     // bytes of the page to go back to
)

// loginForm shows the login form; without authentication there is
// nothing to sign in to, and it sends the browser to the runs.
func (v *Viewer) loginForm(w http.ResponseWriter, r *http.Request) {
	if v.opts.Authenticate == nil {
		http.Redirect(w, r, v.prefix, http.StatusSeeOther)
		return
	}
	v.render(w, r, http.StatusOK, "login", loginData{Next: v.next(r.URL.Query().Get("next"))}, Identity{})
}

// loginData fills the login form.
type loginData struct {
	Next    string
	Problem string
}

// login exchanges the form's credential for a session cookie.
func (v *Viewer) login(w http.ResponseWriter, r *http.Request) {
	if v.opts.Authenticate == nil {
		http.Redirect(w, r, v.prefix, http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		v.render(w, r, http.StatusBadRequest, "login", loginData{Problem: fmt.Sprintf("The form could not be read (at most %d bytes): %v", maxLoginBody, err)}, Identity{})
		return
	}
	next := v.next(r.PostForm.Get("next"))
	token := strings.TrimSpace(r.PostForm.Get("token"))
	data := loginData{Next: next}
	switch {
	case token == "":
		data.Problem = "Paste a token: one of the server's bearer tokens (server.auth), or an OAuth access token."
	case len(token) > maxCredential:
		data.Problem = fmt.Sprintf("The token is %d bytes long; at most %d are accepted.", len(token), maxCredential)
	}
	if data.Problem != "" {
		v.render(w, r, http.StatusBadRequest, "login", data, Identity{})
		return
	}
	id, err := v.opts.Authenticate(r.Context(), token)
	if err != nil {
		v.log.Info("viewer sign-in refused", "remote", r.RemoteAddr, "err", err)
		data.Problem = "The token was refused: " + err.Error()
		v.render(w, r, http.StatusUnauthorized, "login", data, Identity{})
		return
	}
	value, expires := v.sessions.start(id)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: value, Path: v.prefix, Expires: expires,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	v.log.Info("viewer sign-in", "user", id.Name, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the browser's session.
func (v *Viewer) logout(w http.ResponseWriter, r *http.Request) {
	v.sessions.end(r)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: v.prefix, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, v.prefix+"login", http.StatusSeeOther)
}

// next returns where to go after signing in: a path of the viewer's,
// else its runs list. Anything else (another site, a scheme, //host) is
// refused, so the form cannot be used to send a browser elsewhere.
func (v *Viewer) next(p string) string {
	if p == "" || len(p) > maxNext || !strings.HasPrefix(p, v.prefix) || strings.ContainsAny(p, "\\\r\n") {
		return v.prefix
	}
	return p
}
