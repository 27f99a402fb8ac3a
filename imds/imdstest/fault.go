package imdstest

import (
	"net/http"
	"time"
)

// A Fault makes the server misbehave the way IMDS and the networks in
// front of it do. A request takes the first injected Fault whose Key
// matches it, before the server looks at the request (its token included),
// as a throttling front end or a proxy answers in IMDS's place. The
// fault's effects apply in this order: Hang, Delay, Drop, Status and Body.
// A Fault with none of them set lets the request through.
//
// Faults that clients of IMDS meet:
//
//	Fault{Count: 40, Status: 503}                          // a burst of 503, token requests included
//	Fault{Key: PathInstanceAction, Body: "<html>..."}      // a captive portal's page, status 200
//	Fault{Key: PathInstanceAction, Status: http.StatusOK}  // an empty answer, status 200
//	Fault{Key: PathScheduled, Status: http.StatusNotFound} // a 404 where IMDS sends []
//	Fault{Delay: 50 * time.Millisecond}                    // every answer late
//	Fault{Hang: true}                                      // IMDS stops answering
//	Fault{Drop: true, Count: 1}                            // one connection reset
type Fault struct {
	// Key limits the fault to one path, such as [PathInstanceAction], or
	// to token requests with "api/token"; empty means every request.
	Key string

	// Count is how many requests the fault applies to; then it is
	// removed. Zero means every request until [Server.ClearFaults].
	Count int

	// Hang: the request gets no answer until ClearFaults (then it is
	// served normally), until [Server.Stop] or [Server.Close] (then its
	// connection is closed), or until the client gives up.
	Hang bool

	// Delay holds the request back this long, then it goes on to the
	// fault's other effects or is served normally. Stop, Close and the
	// client giving up end it early, as for Hang.
	Delay time.Duration

	// Drop closes the connection without an answer, after Delay, as a
	// reset connection or a dying proxy does.
	Drop bool

	// Status answers with this status code, such as 429 or 503, and
	// Body. An empty Body is the status text for a status other than
	// 200, and an empty answer for 200.
	Status int

	// Body answers with this body, with status 200 unless Status is set:
	// truncated JSON, an HTML page.
	Body string
}

// Inject adds f to the faults. Faults apply in the order they were
// injected, so that Inject(Fault{Count: 2, Status: 503}) then
// Inject(Fault{Count: 1, Drop: true}) fails two requests and drops the
// third; each request takes at most one.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault, and lets hanging requests go on to be
// served normally.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	close(s.cleared)
	s.cleared = make(chan struct{})
}

// takeFault returns the fault that applies to a request for key, or nil.
// s.mu must be held.
func (s *Server) takeFault(key string) *Fault {
	for i, f := range s.faults {
		if f.Key != "" && f.Key != key {
			continue
		}
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		c := *f
		return &c
	}
	return nil
}

// misbehave applies the effects of f, and reports whether the request has
// been dealt with. cleared is closed by ClearFaults, gone by Stop and
// Close. A hang that ClearFaults releases leaves f's other effects out:
// the request is served normally from there on.
func misbehave(w http.ResponseWriter, r *http.Request, f *Fault, cleared, gone <-chan struct{}) bool {
	if f.Hang {
		select {
		case <-cleared:
			return false
		case <-r.Context().Done():
			return true
		case <-gone:
			hangUp(w)
			return true
		}
	}
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return true
		case <-gone:
			hangUp(w)
			return true
		}
	}
	switch {
	case f.Drop:
		hangUp(w)
	case f.Status != 0 || f.Body != "":
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		write(w, status, f.Body)
	default:
		return false
	}
	return true
}

// hangUp closes the connection without writing anything.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("termsig: imdstest: the ResponseWriter cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	_ = conn.Close()
}
