package journey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

// company is a signed-up company as its integrator sees it.
type company struct {
	ID      string
	Kind    string
	Email   string
	Session string // dashboard access token
	APIKey  string
}

// apiCall is one request to the public API. auth is "session", "key" or "" (public).
type apiCall struct {
	method, path string
	as           *company
	auth         string
	body         any
}

// call sends the request and decodes a JSON answer into out (when not nil); it fails the test
// unless the status is one of want.
func (s *stack) call(c apiCall, out any, want ...int) int {
	s.t.Helper()
	status, body, err := s.try(c)
	if err != nil {
		s.t.Fatalf("journey: %s %s: %v", c.method, c.path, err)
	}
	ok := false
	for _, w := range want {
		ok = ok || status == w
	}
	if !ok {
		s.t.Fatalf("journey: %s %s: status %d, want %v: %s", c.method, c.path, status, want, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			s.t.Fatalf("journey: %s %s: decode %s: %v", c.method, c.path, body, err)
		}
	}
	return status
}

var apiClient = &http.Client{Timeout: 30 * time.Second}

func (s *stack) try(c apiCall) (int, []byte, error) {
	var body io.Reader
	if c.body != nil {
		b, err := json.Marshal(c.body)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(c.method, s.baseURL+c.path, body)
	if err != nil {
		return 0, nil, err
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch c.auth {
	case "session":
		req.Header.Set("Authorization", "Bearer "+c.as.Session)
	case "key":
		req.Header.Set("x-api-key", c.as.APIKey)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

var codeRE = regexp.MustCompile(`\b[0-9]{6}\b`)

// signUp registers a company through the magic-code sign-in (the code read from the e-mail
// the api sent to the test's SMTP server) and gives it an API key.
func (s *stack) signUp(kind, name string) *company {
	s.t.Helper()
	email := strings.ToLower(testenv.Name(kind)) + "@journey.example"
	s.call(apiCall{method: "POST", path: "/api/auth/magic-code", body: map[string]string{"email": email}}, nil, http.StatusAccepted)
	msg := s.inbox.Wait(s.t, email, 30*time.Second)
	code := codeRE.FindString(msg.Text)
	if code == "" {
		s.t.Fatalf("journey: no 6-digit code in the sign-in e-mail: %q", msg.Text)
	}
	var session struct {
		AccessToken string `json:"access_token"`
		Company     struct {
			ID string `json:"id"`
		} `json:"company"`
	}
	s.call(apiCall{method: "POST", path: "/api/auth/magic-code/verify", body: map[string]string{
		"email": email, "code": code, "company_kind": kind, "company_name": name}}, &session, http.StatusOK)
	c := &company{ID: session.Company.ID, Kind: kind, Email: email, Session: session.AccessToken}
	var key struct {
		Key string `json:"key"`
	}
	s.call(apiCall{method: "POST", path: "/api/api-keys", as: c, auth: "session", body: map[string]string{"name": "journey"}}, &key, http.StatusCreated)
	c.APIKey = key.Key
	return c
}

// visitor is one browser: its own cookies (the visitor id) and user agent.
type visitor struct {
	ua string
	hc *http.Client
}

func newVisitor(n int) *visitor {
	jar, _ := cookiejar.New(nil)
	return &visitor{ua: browserAgent(fmt.Sprintf("journey visitor %d", n)), hc: browserClient(jar, nil)}
}

// browserAgent is a browser's user agent: tools' agents (Go-http-client) are counted as bots.
func browserAgent(label string) string {
	return "Mozilla/5.0 (X11; Linux x86_64; " + label + ") AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"
}

// browserClient follows no redirect (the landing page is not the platform's) and keeps
// cookies in jar (nil: none, a browser that refuses them).
func browserClient(jar http.CookieJar, transport http.RoundTripper) *http.Client {
	return &http.Client{Jar: jar, Transport: transport, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// click opens a tracking link and returns the click id the landing page receives.
func (v *visitor) click(baseURL, code string) (string, error) {
	return v.clickWith(baseURL, code, nil)
}

// clickWith is click with extra request headers.
func (v *visitor) clickWith(baseURL, code string, header http.Header) (string, error) {
	req, err := http.NewRequest(http.MethodGet, baseURL+"/c/"+code, nil)
	if err != nil {
		return "", err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", v.ua)
	resp, err := v.hc.Do(req)
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", fmt.Errorf("click: status %d", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return "", fmt.Errorf("click: location: %w", err)
	}
	id := loc.Query().Get("ps_click_id")
	if id == "" {
		return "", fmt.Errorf("click: no ps_click_id in %s", loc)
	}
	return id, nil
}

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", b, err)
	}
	return nil
}
