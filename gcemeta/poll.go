package gcemeta

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"cloud.google.com/go/compute/metadata"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
	"github.com/termsig/termsig/internal/httpguard"
)

type notDefined = metadata.NotDefinedError

// The keys watched, below /computeMetadata/v1/.
const (
	keyPreempted   = "instance/preempted"
	keyMaintenance = "instance/maintenance-event"
	keyUpcoming    = "instance/upcoming-maintenance"
)

// A keySpec says how to read one key and what its values mean.
type keySpec struct {
	path  string
	event string // Notice.Event
	json  bool   // ask for alt=json
	parse func(body []byte) (reading, error)
	// clears: going back to "no event" after an event is reported as
	// Cleared. A preemption is not undone, so preempted does not clear.
	clears bool
	// optional keys are newer; a 404 for them is expected and logged at
	// debug level only.
	optional bool
}

var keys = [...]keySpec{
	{path: keyPreempted, event: EventPreempted, parse: parsePreempted},
	{path: keyMaintenance, event: EventMaintenance, parse: parseMaintenanceEvent, clears: true},
	{path: keyUpcoming, event: EventUpcomingMaintenance, json: true, parse: parseUpcoming, clears: true, optional: true},
}

// maxBody bounds what is read of a response: the values are a few bytes,
// the upcoming-maintenance object a few hundred.
const maxBody = 64 << 10

// flavorHeader is the header, with the value "Google", that requests to the
// metadata server carry and that its answers carry too.
const flavorHeader = "Metadata-Flavor"

// errNotMetadataServer is an answer without "Metadata-Flavor: Google": the
// metadata server puts it on every answer, so whatever such an answer
// says, it is not a value (it comes from a captive portal, a proxy, a
// request that went to another host), and never makes a notice.
var errNotMetadataServer = errors.New("answer without Metadata-Flavor: Google: not the metadata server")

// maxRaw bounds Notice.Raw.
const maxRaw = 4 << 10

// userAgent identifies termsig's requests in the server's logs.
const userAgent = "termsig-gcemeta"

// watchKey reads key i, then long-polls it, sending a notice for each
// change, until ctx is done or, for an optional key, the server turns out
// not to have it. Its first read, once answered (and any notice the answer
// called for sent) or failed, is key i's first look: once every key has
// had it, the source is ready.
func (w *watcher) watchKey(ctx context.Context, i int) {
	p := &keyPoll{w: w, i: i, k: &keys[i], bo: backoff.Backoff{Base: w.cfg.backoff, Max: w.cfg.MaxBackoff, Jitter: true}}
	var earliest time.Time
	for backoff.Until(ctx, earliest) {
		nt, next, more := p.poll(ctx)
		if ctx.Err() != nil {
			return
		}
		if nt != nil {
			if err := w.run.Send(ctx, *nt); err != nil {
				return
			}
		}
		w.health.Looked(i) // after the first read; again does nothing
		if !more {
			return
		}
		earliest = next
	}
}

// A keyPoll is the state of the polling of one key.
type keyPoll struct {
	w  *watcher
	i  int
	k  *keySpec
	bo backoff.Backoff

	etag   string    // of the last answer understood or rejected; "" until then
	failed bool      // the last request failed: the next is a plain read
	seen   bool      // a value was understood: the key is served
	cur    reading   // what the last value understood meant
	noETag bool      // the server sent no ETag (logged once)
	rapid  time.Time // when the last long poll that followed a change at once went out
}

// poll makes one request and works out what it means: the notice to send,
// if any; when the next request may start; and whether there is one (not
// for an optional key that the server does not have).
func (p *keyPoll) poll(ctx context.Context) (nt *termsig.Notice, next time.Time, more bool) {
	w, k := p.w, p.k
	start := time.Now()
	// After a failure, a plain read: the value may have changed since
	// p.etag, and a server that ignores last_etag (some emulators) would
	// hold a long poll until timeout_sec without telling. The long polls
	// go on from the ETag of that read.
	plain := p.etag == "" || p.failed
	etag := p.etag
	if plain {
		etag = ""
	}
	body, tag, err := w.get(ctx, k, etag)
	if ctx.Err() != nil {
		return nil, time.Time{}, false
	}
	recovering := p.failed
	p.failed = err != nil
	if err != nil && !p.seen && k.optional && isNotFound(err) {
		// A newer key that this server does not have. The others are
		// always there on GCE: a 404 for them is a fault and is
		// retried, since giving up would mean missing a preemption.
		w.log.Debug("gcemeta: key not served here; not watching it", "key", k.path)
		w.health.Set(p.i, nil)
		return nil, time.Time{}, false
	}
	var r reading
	if err == nil {
		r, err = k.parse(body)
		if err != nil && tag != "" {
			// Wait for the next change rather than read the same bad
			// value again and again.
			p.etag = tag
		}
	}
	if err != nil {
		w.health.Set(p.i, &Error{Key: k.path, Err: err})
		// After a failure the backoff, not MinInterval, spaces the
		// requests: it grows, so a failing server is not hammered either.
		return nil, time.Now().Add(p.bo.Next()), true
	}
	if !recovering || !plain {
		// Not the plain read after a failure: that one answering says
		// nothing of the long polls, which may fail again (a server
		// that fails them and answers plain reads is still backed off).
		p.bo.Reset()
	}
	w.health.Set(p.i, nil)
	// A new value under a new ETag: a real change.
	changed := tag != "" && tag != p.etag && r.id != p.cur.id
	p.seen, p.etag = true, tag
	next = p.after(start, plain && tag != "", changed)
	if tag == "" && !p.noETag {
		p.noETag = true
		w.log.Warn("gcemeta: server sends no ETag; reading the key every MinInterval instead of long polling", "key", k.path, "min_interval", w.cfg.MinInterval)
	}
	if r.id == p.cur.id {
		return nil, next, true
	}
	prev := p.cur
	p.cur = r
	w.log.Info("gcemeta: value changed", "key", k.path, "value", r.value)
	if n, ok := notice(k, prev, r, time.Now(), body); ok {
		nt = &n
	}
	return nt, next, true
}

// after returns when the long poll after an answer to one that started at
// start is due: MinInterval later, unless the answer was to a plain read
// (first) or brought a change.
func (p *keyPoll) after(start time.Time, first, changed bool) time.Time {
	switch {
	case first:
		// The first long poll follows a read at once: only an answer to
		// a long poll can be one that spins.
		return time.Time{}
	case changed:
		// The next long poll goes out at once, so that a second change
		// right after the first is not held back by MinInterval. A
		// server that ignores wait_for_change answers with the value
		// and ETag it had, so it still costs one request per
		// MinInterval; one whose value flips at every answer gets one
		// request per MinInterval/10 at the most.
		next := p.rapid.Add(p.w.cfg.MinInterval / 10)
		if now := time.Now(); next.Before(now) {
			next = now
		}
		p.rapid = next
		return next
	}
	return start.Add(p.w.cfg.MinInterval)
}

// notice returns the notice for a change from prev to r, if any.
func notice(k *keySpec, prev, r reading, now time.Time, body []byte) (termsig.Notice, bool) {
	raw := string(body)
	if len(raw) > maxRaw {
		raw = raw[:maxRaw]
	}
	nt := termsig.Notice{Event: k.event, Observed: now, Raw: raw}
	switch {
	case r.id != "":
		nt.Kind, nt.Reason, nt.Deadline = r.kind, r.reason, r.deadline
		if r.after > 0 {
			nt.Deadline = now.Add(r.after)
		}
	case prev.id != "" && k.clears:
		nt.Kind, nt.Reason = termsig.Cleared, r.reason
	default:
		return nt, false
	}
	return nt, true
}

// get reads key k, long-polling if etag is not empty. It returns the body
// and ETag of a 200 answer, or an error.
func (w *watcher) get(ctx context.Context, k *keySpec, etag string) (body []byte, tag string, err error) {
	q := url.Values{}
	if k.json {
		q.Set("alt", "json")
	}
	timeout := w.cfg.RequestTimeout
	if etag != "" {
		q.Set("wait_for_change", "true")
		q.Set("last_etag", etag)
		q.Set("timeout_sec", strconv.Itoa(w.timeoutSec))
		timeout += time.Duration(w.timeoutSec) * time.Second
	}
	u := w.base + k.path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set(flavorHeader, "Google")
	req.Header.Set("User-Agent", userAgent)
	res, err := w.hc.Do(req)
	if err != nil {
		return nil, "", httpguard.Stable(ctx, rctx, err, timeout)
	}
	defer res.Body.Close()
	if res.Header.Get(flavorHeader) != "Google" {
		return nil, "", errNotMetadataServer
	}
	body, err = io.ReadAll(res.Body) // cut off past maxBody by the guard (see start)
	if err != nil {
		return nil, "", httpguard.Stable(ctx, rctx, err, timeout)
	}
	switch res.StatusCode {
	case http.StatusOK:
		return body, res.Header.Get("ETag"), nil
	case http.StatusNotFound:
		return nil, "", metadata.NotDefinedError(k.path)
	default:
		return nil, "", &metadata.Error{Code: res.StatusCode, Message: httpguard.Snippet(body)}
	}
}
