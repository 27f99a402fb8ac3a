package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
	"github.com/termsig/termsig/internal/host"
	"github.com/termsig/termsig/internal/httpguard"
)

// Name is the name of the source, in notices and in Notifier.Status.
const Name = "azure"

// The paths the source reads, below the endpoint, and their API versions.
const (
	pathScheduledEvents = "/metadata/scheduledevents"
	pathVMName          = "/metadata/instance/compute/name"

	eventsQuery = "?api-version=2020-07-01"
	nameQuery   = "?api-version=2021-02-01&format=text"
)

// maxBody bounds what is read of an answer.
const maxBody = 1 << 20

// A Source watches Azure's Scheduled Events for this VM: preemption of a
// spot VM, deletion, redeployment, reboot, freeze. Create it with [New].
// A Source may be watched by one Notifier at a time; see the package
// documentation.
type Source struct {
	cfg Config

	mu       sync.Mutex
	current  map[string]tracked       // this VM's events in the last document read, by EventId
	acked    map[string]uint64        // EventId → the generation acknowledged
	inflight map[string]chan struct{} // EventIds being acknowledged: closed when done
	gen      uint64                   // the last generation given
	watching bool
}

// A tracked event is one of this VM's events in the last document. Its
// generation changes when it comes back after it left, so that an
// acknowledgement is for one stay of it in the document.
type tracked struct {
	id       string    // its EventId, which acknowledgements name
	key      string    // EventType and NotBefore
	deadline time.Time // of its notice
	nbErr    error     // why NotBefore is not the deadline, if it is not
	gen      uint64
	shared   bool // its Resources name other VMs too
}

// New returns a Source configured by cfg. It does not check cfg: Watch
// does.
func New(cfg Config) *Source {
	return &Source{cfg: cfg, current: map[string]tracked{}, acked: map[string]uint64{}, inflight: map[string]chan struct{}{}}
}

// Name returns "azure".
func (s *Source) Name() string { return Name }

// Available returns, without touching the network, the error that Watch
// would return at once, or nil: an error that does not wrap
// termsig.ErrUnavailable if the Config cannot work; nil when an endpoint
// is configured (Config.Endpoint or AZURE_METADATA_ENDPOINT) or the
// firmware has Azure's chassis asset tag (DMI on Linux, SMBIOS through
// the registry on Windows); otherwise an error wrapping
// termsig.ErrUnavailable.
func (s *Source) Available() error {
	if err := s.cfg.validate(); err != nil {
		return err
	}
	if _, from := s.cfg.endpoint(); from != "" {
		return nil
	}
	if root := s.cfg.withDefaults().Root; !host.Detect(root, nil).Azure {
		return fmt.Errorf("azure: not an Azure VM (%s), and neither Config.Endpoint nor %s is set: %w",
			host.ReadBIOS(root).Quote("chassis_asset_tag"), EndpointEnv, termsig.ErrUnavailable)
	}
	return nil
}

// Watch polls the scheduled events until ctx is done; see the package
// documentation for what it sends. It returns at once an error wrapping
// termsig.ErrUnavailable when [Source.Available] says so, and another
// error, starting "azure: ", when the Config cannot work. It calls
// [termsig.Run.Ready] once the scheduled events have answered once, or
// failed once: the first look needs the network (and the first call on a
// VM can take two minutes), so the Source has no Traits method and
// termsig.New does not wait for it.
func (s *Source) Watch(ctx context.Context, r *termsig.Run) error {
	if err := s.Available(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.watching {
		s.mu.Unlock()
		return fmt.Errorf("azure: Source watched by two Notifiers at once")
	}
	// current and acked are kept from an earlier Watch: Release of its
	// notices works until the first document says otherwise.
	s.watching = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.watching = false
		s.mu.Unlock()
	}()
	w := s.newWatcher(r)
	defer w.close()
	w.run(ctx)
	return ctx.Err()
}

// ErrShared is returned by Release for an event whose Resources name other
// VMs too: acknowledging it would start it for them as well, whose work
// this program cannot vouch for.
var ErrShared = errors.New("azure: the event concerns other VMs too; acknowledging it would start it for them as well")

// Release acknowledges the event of n, so that Azure starts it now instead
// of at its NotBefore time: POST {"StartRequests":[{"EventId":…}]}. Call
// it once the VM is ready for the event (its work handed back); see
// termsig.Releaser. An event that is no longer in the document, or was
// acknowledged already (an event that left and came back is new), or a
// Cleared notice, is left alone (nil); an event that names
// other VMs too is refused ([ErrShared]). The request is retried, with
// the backoff of polls, until it succeeds, the event leaves the document,
// or ctx is done; the error then says why. So Release blocks for as long
// as ctx allows against a service that keeps failing (on a real VM, until
// the VM is gone): give ctx a timeout. Concurrent Releases of one event
// send one request. Stop never acknowledges anything.
func (s *Source) Release(ctx context.Context, n termsig.Notice) error {
	if n.Source != Name {
		return fmt.Errorf("azure: release of a notice of source %q", n.Source)
	}
	if n.Kind == termsig.Cleared {
		return nil
	}
	for {
		s.mu.Lock()
		cur, ok := s.current[n.Event]
		switch {
		case !ok || s.acked[n.Event] == cur.gen:
			s.mu.Unlock()
			return nil
		case cur.shared:
			s.mu.Unlock()
			return fmt.Errorf("%w: event %s", ErrShared, n.Event)
		}
		if wait := s.inflight[n.Event]; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue // the other one is done: see where it left things
			case <-ctx.Done():
				return fmt.Errorf("azure: acknowledge event %s: %w", n.Event, ctx.Err())
			}
		}
		done := make(chan struct{})
		s.inflight[n.Event] = done
		s.mu.Unlock()
		err := s.acknowledge(ctx, n.Event, cur.id, cur.gen)
		s.mu.Lock()
		delete(s.inflight, n.Event)
		close(done)
		if now, ok := s.current[n.Event]; err == nil && ok && now.gen == cur.gen {
			s.acked[n.Event] = cur.gen
		}
		s.mu.Unlock()
		return err
	}
}

// pending reports whether version gen of event id is still in the
// document and not acknowledged: worth a request.
func (s *Source) pending(id string, gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.current[id]
	return ok && cur.gen == gen && s.acked[id] != gen
}

// acknowledge posts a StartRequest for version gen of the event whose
// notices' Event is key and whose EventId is id, until it succeeds, the
// event leaves the document (nil), or ctx ends.
func (s *Source) acknowledge(ctx context.Context, key, id string, gen uint64) error {
	c := s.cfg.withDefaults()
	base := c.base()
	tr := httpguard.NewTransport(2*time.Second, 1, c.dnsDial)
	defer tr.CloseIdleConnections()
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: tr}
	}
	hc, release := httpguard.Guard(hc, maxBody)
	defer release()
	body, _ := json.Marshal(map[string][]map[string]string{"StartRequests": {{"EventId": id}}})
	bo := backoff.Backoff{Base: c.Interval, Max: c.MaxBackoff, Jitter: true}
	var last error // what went wrong; not the end of ctx, which ends the last try
	for s.pending(key, gen) {
		err := post(ctx, hc, base+pathScheduledEvents+eventsQuery, body, c.RequestTimeout)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		if ctx.Err() != nil || !backoff.Sleep(ctx, bo.Next()) {
			if errors.Is(last, ctx.Err()) {
				return fmt.Errorf("azure: acknowledge event %s: %w", key, last)
			}
			return fmt.Errorf("azure: acknowledge event %s: %w (%w)", key, last, ctx.Err())
		}
	}
	return nil // gone, or acknowledged meanwhile
}

// post sends one acknowledgement.
func post(ctx context.Context, hc *http.Client, url string, body []byte, timeout time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Metadata", "true")
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return httpguard.Stable(ctx, rctx, err, timeout)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", res.StatusCode, httpguard.Snippet(b))
	}
	return nil
}

var (
	_ termsig.Detector = (*Source)(nil)
	_ termsig.Releaser = (*Source)(nil)
)
