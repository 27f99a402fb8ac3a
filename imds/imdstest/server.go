package imdstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// The metadata paths the server knows, relative to /latest/meta-data/.
const (
	PathInstanceAction  = "spot/instance-action"
	PathTerminationTime = "spot/termination-time"
	PathRebalance       = "events/recommendations/rebalance"
	PathScheduled       = "events/maintenance/scheduled"
	PathLifecycle       = "autoscaling/target-lifecycle-state"
	PathInstanceID      = "instance-id"
	PathCredentials     = "iam/security-credentials/"
)

// PathIdentityDocument is the instance identity document, relative to
// /latest/: the SDK reads the region from it.
const PathIdentityDocument = "dynamic/instance-identity/document"

// The instance the server stands for.
const (
	InstanceID = "i-0123456789abcdef0"
	Region     = "us-east-1"
)

const (
	tokenPath      = "/latest/api/token"
	metadataPrefix = "/latest/meta-data/"
	tokenHeader    = "X-Aws-Ec2-Metadata-Token"
	ttlHeader      = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
)

// A ScheduledEvent is one entry of events/maintenance/scheduled. Times are
// written in IMDS's format ("21 Jan 2019 09:00:43 GMT"); a zero NotAfter is
// left out, as IMDS does for some events.
type ScheduledEvent struct {
	Code        string // instance-reboot, system-reboot, system-maintenance, instance-retirement, instance-stop
	Description string
	EventID     string
	NotBefore   time.Time
	NotAfter    time.Time
	State       string // active, canceled, completed; empty means active
}

// A Server is a fake IMDS on a loopback port, for tests. It speaks IMDSv2
// (see the package documentation), answers 404 while nothing is pending,
// and serves what the test sets: a spot interruption, a rebalance
// recommendation, scheduled events, a lifecycle state. Faults are injected
// with [Server.Inject].
//
// Create it with [NewServer] and Close it when done. Its methods are safe
// for concurrent use.
type Server struct {
	// URL is the endpoint, such as http://127.0.0.1:41234, for
	// imds.Config.Endpoint or AWS_EC2_METADATA_SERVICE_ENDPOINT.
	URL string

	host   *fakefault.Host                    // the sockets and the request counts
	faults fakefault.Queue[fakefault.Effects] // has a lock of its own

	mu           sync.Mutex
	tokens       map[string]time.Time
	tokenOpt     bool // tokens optional (IMDSv1 allowed)
	action       string
	actionTime   time.Time // zero: request time + 2 minutes, like the AWS mock
	rebalance    time.Time
	hasRebalance bool
	scheduled    []ScheduledEvent
	lifecycle    string
	role         string // the instance profile's role; "" for none
}

// NewServer starts a fake IMDS on 127.0.0.1 with nothing pending and
// IMDSv2 tokens required.
func NewServer() *Server {
	s := &Server{tokens: map[string]time.Time{}}
	s.host = fakefault.NewHost("imdstest")
	s.URL = s.host.URL()
	s.host.Serve(http.HandlerFunc(s.handle))
	return s
}

// Stop makes the server go away, as IMDS does when the network path to it
// breaks: it stops listening and drops every open connection, so clients see
// connection refused or reset. Start brings it back on the same address with
// the same state. Stop on a stopped server does nothing.
func (s *Server) Stop() { s.host.Stop() }

// Start brings a stopped server back on its address. It returns an error if
// the address cannot be had again, or if the server was closed.
func (s *Server) Start() error { return s.host.Start() }

// Close releases every request that waits or hangs (their connections are
// closed without an answer), closes all connections and shuts the server
// down; Start fails after it. It is safe to call more than once.
func (s *Server) Close() { s.host.Close() }

// SetInterruption schedules a spot interruption: spot/instance-action
// answers {"action": action, "time": at} (and spot/termination-time answers
// at) until ClearInterruption. action is normally "terminate", "stop" or
// "hibernate"; it is served as given. A zero at makes the server answer with
// the request time plus two minutes, recomputed on every request, as the AWS
// metadata mock does.
func (s *Server) SetInterruption(action string, at time.Time) {
	s.mu.Lock()
	s.action, s.actionTime = action, at
	s.mu.Unlock()
}

// ClearInterruption makes spot/instance-action answer 404 again.
func (s *Server) ClearInterruption() { s.SetInterruption("", time.Time{}) }

// SetRebalance makes events/recommendations/rebalance answer
// {"noticeTime": at}.
func (s *Server) SetRebalance(at time.Time) {
	s.mu.Lock()
	s.rebalance, s.hasRebalance = at, true
	s.mu.Unlock()
}

// ClearRebalance makes events/recommendations/rebalance answer 404 again.
func (s *Server) ClearRebalance() {
	s.mu.Lock()
	s.hasRebalance = false
	s.mu.Unlock()
}

// SetScheduledEvents sets the list that events/maintenance/scheduled
// serves; with no events it serves [].
func (s *Server) SetScheduledEvents(events ...ScheduledEvent) {
	s.mu.Lock()
	s.scheduled = append([]ScheduledEvent(nil), events...)
	s.mu.Unlock()
}

// SetLifecycleState sets autoscaling/target-lifecycle-state, such as
// "InService" or "Terminated"; "" makes it answer 404, as for an instance
// that never transitioned.
func (s *Server) SetLifecycleState(state string) {
	s.mu.Lock()
	s.lifecycle = state
	s.mu.Unlock()
}

// SetRole gives the instance an instance profile whose role is named
// role: iam/security-credentials/ lists it, and
// iam/security-credentials/ROLE serves made-up credentials that expire in
// an hour, as IMDS does, so that the SDK's default credential chain
// works against the server. "" takes it away (both answer 404). The
// identity document (dynamic/instance-identity/document), from which the
// SDK reads the region, is always served: its region is [Region].
func (s *Server) SetRole(role string) {
	s.mu.Lock()
	s.role = role
	s.mu.Unlock()
}

// SetTokensOptional allows requests without a token (IMDSv1) when optional
// is true. A request with an invalid or expired token still gets 401.
func (s *Server) SetTokensOptional(optional bool) {
	s.mu.Lock()
	s.tokenOpt = optional
	s.mu.Unlock()
}

// ExpireTokens invalidates every token issued so far, as a restart of the
// metadata service does: the next request with one of them gets 401.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	clear(s.tokens)
	s.mu.Unlock()
}

// Requests returns how many requests for path (such as PathInstanceAction,
// or "api/token" for the token) the server has answered, faults and
// requests it hung up on included. A request that hangs counts once it
// ends.
func (s *Server) Requests(path string) int { return s.host.Requests(path) }

// Served returns a channel that is closed when a request next arrives or
// is answered, so that a test can wait for a poll without sleeping: take
// the channel, check Requests or InFlight, and wait on the channel if the
// count is not there yet.
func (s *Server) Served() <-chan struct{} { return s.host.Served() }

// AwaitRequests waits until the server has answered at least n requests
// for path (as counted by Requests), or ctx is done; then it returns ctx's
// error. A test reads Requests, then awaits that count plus k, to know
// that the client has seen the server's current state k times.
func (s *Server) AwaitRequests(ctx context.Context, path string, n int) error {
	return s.host.AwaitRequests(ctx, path, n)
}

// handle answers one request: with the fault it takes, if any, else as
// IMDS does.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, metadataPrefix)
	if r.URL.Path == tokenPath {
		key = "api/token"
	}
	s.host.Arrive()
	defer s.host.Answered(key)

	f, cleared, hit := s.faults.Take(key)
	gone := s.host.Gone()
	if hit && f.Apply(w, r, cleared, gone, write) == fakefault.Handled {
		return
	}

	switch {
	case r.URL.Path == tokenPath:
		s.token(w, r)
	case r.URL.Path == "/latest/"+PathIdentityDocument:
		if status := s.authorize(r); status != http.StatusOK {
			write(w, status, "")
			return
		}
		b, _ := json.Marshal(map[string]string{"instanceId": InstanceID, "region": Region, "availabilityZone": Region + "a",
			"accountId": "123456789012", "instanceType": "m5.large", "imageId": "ami-0123456789abcdef0", "architecture": "x86_64"})
		write(w, http.StatusOK, string(b))
	case !strings.HasPrefix(r.URL.Path, metadataPrefix):
		write(w, http.StatusNotFound, "")
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		write(w, http.StatusMethodNotAllowed, "")
	default:
		if status := s.authorize(r); status != http.StatusOK {
			write(w, status, "")
			return
		}
		status, body := s.metadata(key, time.Now())
		write(w, status, body)
	}
}

// InFlight returns how many requests the server is answering now, such as
// requests held by a fault with Hang or Delay.
func (s *Server) InFlight() int { return s.host.InFlight() }

func write(w http.ResponseWriter, status int, body string) {
	if body == "" && status != http.StatusOK {
		body = http.StatusText(status)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// token serves PUT /latest/api/token as IMDS does.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		write(w, http.StatusMethodNotAllowed, "")
		return
	}
	if r.Header.Get("X-Forwarded-For") != "" {
		write(w, http.StatusForbidden, "")
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(ttlHeader))
	if err != nil || ttl < 1 || ttl > 21600 {
		write(w, http.StatusBadRequest, "")
		return
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.tokens[tok] = time.Now().Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	w.Header().Set(ttlHeader, strconv.Itoa(ttl))
	write(w, http.StatusOK, tok)
}

// authorize returns 200 if r may read metadata, else the status to answer.
func (s *Server) authorize(r *http.Request) int {
	tok := r.Header.Get(tokenHeader)
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok == "" {
		if s.tokenOpt {
			return http.StatusOK
		}
		return http.StatusUnauthorized
	}
	exp, ok := s.tokens[tok]
	if !ok || time.Now().After(exp) {
		delete(s.tokens, tok)
		return http.StatusUnauthorized
	}
	return http.StatusOK
}

// metadata returns the answer to a request for key at now, as IMDS gives
// it.
func (s *Server) metadata(key string, now time.Time) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch key {
	case PathInstanceAction, PathTerminationTime:
		if s.action == "" {
			return http.StatusNotFound, ""
		}
		at := s.actionTime
		if at.IsZero() {
			at = now.Add(2 * time.Minute)
		}
		stamp := at.UTC().Format("2006-01-02T15:04:05Z")
		if key == PathTerminationTime {
			return http.StatusOK, stamp
		}
		b, _ := json.Marshal(map[string]string{"action": s.action, "time": stamp})
		return http.StatusOK, string(b)
	case PathRebalance:
		if !s.hasRebalance {
			return http.StatusNotFound, ""
		}
		b, _ := json.Marshal(map[string]string{"noticeTime": s.rebalance.UTC().Format("2006-01-02T15:04:05Z")})
		return http.StatusOK, string(b)
	case PathScheduled:
		return http.StatusOK, scheduledJSON(s.scheduled)
	case PathLifecycle:
		if s.lifecycle == "" {
			return http.StatusNotFound, ""
		}
		return http.StatusOK, s.lifecycle
	case PathInstanceID:
		return http.StatusOK, InstanceID
	case PathCredentials:
		if s.role == "" {
			return http.StatusNotFound, ""
		}
		return http.StatusOK, s.role
	}
	if role, ok := strings.CutPrefix(key, PathCredentials); ok && s.role != "" && role == s.role {
		b, _ := json.Marshal(map[string]string{"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "ASIAIMDSTESTEXAMPLE",
			"SecretAccessKey": "imdstest-secret", "Token": "imdstest-token",
			"LastUpdated": now.UTC().Format(time.RFC3339), "Expiration": now.Add(time.Hour).UTC().Format(time.RFC3339)})
		return http.StatusOK, string(b)
	}
	return http.StatusNotFound, ""
}

// scheduledJSON returns events/maintenance/scheduled as IMDS writes it.
func scheduledJSON(events []ScheduledEvent) string {
	out := make([]map[string]string, 0, len(events))
	for _, e := range events {
		m := map[string]string{
			"Code":        e.Code,
			"Description": e.Description,
			"EventId":     e.EventID,
			"NotBefore":   imdsTime(e.NotBefore),
			"State":       e.State,
		}
		if m["State"] == "" {
			m["State"] = "active"
		}
		if !e.NotAfter.IsZero() {
			m["NotAfter"] = imdsTime(e.NotAfter)
		}
		out = append(out, m)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// imdsTime formats t as IMDS writes scheduled-event times.
func imdsTime(t time.Time) string { return t.UTC().Format("2 Jan 2006 15:04:05 GMT") }
