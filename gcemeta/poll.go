package gcemeta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"cloud.google.com/go/compute/metadata"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
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
	json  bool // ask for alt=json
	parse func(body []byte) (reading, error)
	// clears: going back to "no event" after an event is reported as
	// Cleared. A preemption is not undone, so preempted does not clear.
	clears bool
	// optional keys are newer; a 404 for them is expected and logged at
	// debug level only.
	optional bool
}

var keys = [...]keySpec{
	{path: keyPreempted, parse: parsePreempted},
	{path: keyMaintenance, parse: parseMaintenanceEvent, clears: true},
	{path: keyUpcoming, json: true, parse: parseUpcoming, clears: true, optional: true},
}

// maxBody bounds what is read of a response: the values are a few bytes,
// the upcoming-maintenance object a few hundred.
const maxBody = 64 << 10

// maxRaw bounds Notice.Raw.
const maxRaw = 4 << 10

// userAgent identifies termsig's requests in the server's logs.
const userAgent = "termsig-gcemeta"

// watchKey reads key i, then long-polls it, sending a notice for each
// change, until ctx is done. It returns false, at once, if the key is
// optional and the server does not have it (404 before any value), and
// true otherwise.
func (w *watcher) watchKey(ctx context.Context, i int, out chan<- termsig.Notice) (served bool) {
	k := &keys[i]
	var (
		etag     string  // of the last answer understood or rejected; "" until then
		seen     bool    // a value was understood: the key is served
		cur      reading // what the last value understood meant
		earliest time.Time
		bo       = backoff.Backoff{Base: w.backoff, Max: w.maxBackoff, Jitter: true}
		failing  bool
		noETag   bool
	)
	for {
		if !backoff.Until(ctx, earliest) {
			return true
		}
		start := time.Now()
		earliest = start.Add(w.minInterval)

		plain := etag == ""
		body, tag, err := w.get(ctx, k, etag)
		if ctx.Err() != nil {
			return true
		}
		if err != nil && !seen && k.optional && isNotFound(err) {
			// A newer key that this server does not have. The others are
			// always there on GCE: a 404 for them is a fault and is
			// retried, since giving up would mean missing a preemption.
			w.log.Debug("gcemeta: key not served here; not watching it", "key", k.path)
			w.setHealth(ctx, i, nil)
			return false
		}
		var r reading
		if err == nil {
			r, err = k.parse(body)
			if err != nil && tag != "" {
				// Wait for the next change rather than read the same bad
				// value again and again.
				etag = tag
			}
		}
		if err != nil {
			err = &Error{Key: k.path, Err: err}
			if !failing {
				failing = true
				w.log.Warn("gcemeta: request failed; retrying", "key", k.path, "err", err)
			}
			w.setHealth(ctx, i, err)
			// After a failure the backoff, not MinInterval, spaces
			// the requests: it grows, so a failing server is not
			// hammered either.
			earliest = time.Now().Add(bo.Next())
			continue
		}

		bo.Reset()
		if failing {
			failing = false
			w.log.Info("gcemeta: requests work again", "key", k.path)
		}
		w.setHealth(ctx, i, nil)
		seen = true
		etag = tag
		if plain && tag != "" {
			// The first long poll follows a read at once: only an
			// answer to a long poll can be one that spins.
			earliest = time.Time{}
		}
		if tag == "" && !noETag {
			noETag = true
			w.log.Warn("gcemeta: server sends no ETag; reading the key every MinInterval instead of long polling", "key", k.path, "min_interval", w.minInterval)
		}
		if r.id == cur.id {
			continue
		}
		prev := cur
		cur = r
		w.log.Info("gcemeta: value changed", "key", k.path, "value", r.value)
		nt, ok := notice(k, prev, r, time.Now(), body)
		if !ok {
			continue
		}
		select {
		case out <- nt:
		case <-ctx.Done():
			return true
		}
	}
}

// notice returns the notice for a change from prev to r, if any.
func notice(k *keySpec, prev, r reading, now time.Time, body []byte) (termsig.Notice, bool) {
	raw := string(body)
	if len(raw) > maxRaw {
		raw = raw[:maxRaw]
	}
	nt := termsig.Notice{Source: Name, Observed: now, Raw: raw}
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
	timeout := w.requestTimeout
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
	req.Header.Set("Metadata-Flavor", "Google")
	req.Header.Set("User-Agent", userAgent)
	res, err := w.hc.Do(req)
	if err != nil {
		return nil, "", transportError(ctx, rctx, err, timeout)
	}
	defer res.Body.Close()
	body, err = io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	if err != nil {
		return nil, "", transportError(ctx, rctx, err, timeout)
	}
	if len(body) > maxBody {
		return nil, "", fmt.Errorf("answer longer than %d bytes", maxBody)
	}
	switch res.StatusCode {
	case http.StatusOK:
		return body, res.Header.Get("ETag"), nil
	case http.StatusNotFound:
		return nil, "", metadata.NotDefinedError(k.path)
	default:
		return nil, "", &metadata.Error{Code: res.StatusCode, Message: snippet(body)}
	}
}

// transportError makes err stable and readable: the URL (which carries the
// ETag) is dropped, and a request timeout says so.
func transportError(ctx, rctx context.Context, err error, timeout time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return errNoAnswer(timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// snippet returns the start of an error page, for error messages.
func snippet(b []byte) string {
	const n = 100
	s := string(b)
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
