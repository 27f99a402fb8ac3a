package asg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/backoff"
)

// Name is the name of the source.
const Name = "asg"

// Event is the Event of the source's notices: one scale-in of this
// instance. It is the Event of package imds's lifecycle notice, which the
// source takes the place of.
const Event = "asg/lifecycle"

// A Source watches for this instance's scale-in and holds it with the
// group's termination lifecycle hooks until it is released. Create it with
// [New]. It may be watched by one Notifier at a time.
type Source struct {
	cfg Config // as given to New

	mu       sync.Mutex
	cl       *clients      // built on first need; kept for Release after Watch
	building chan struct{} // closed when the clients being built are ready
	watching int           // Watches running
	id       string        // this instance's id, once known
	group    string        // its group, once known
	hooks    []hook        // its group's termination hooks, as last read
	scaled   bool          // a scale-in was seen
	released bool          // Release was called for it: no heartbeat from now on
	holding  *hold         // the hold of the scale-in, once had
}

// A hold is what holds the instance: the hooks whose lifecycle actions
// wait for it.
type hold struct {
	group, id string
	hooks     []hook
}

// New returns a Source configured by cfg. It does not check cfg: Watch
// and Available do.
func New(cfg Config) *Source { return &Source{cfg: cfg} }

// Name returns "asg".
func (s *Source) Name() string { return Name }

// Available returns, from local facts only, the error that Watch would
// return at once, or nil:
//
//   - an error that does not wrap termsig.ErrUnavailable when the Config
//     cannot work, whatever the host;
//   - an error wrapping termsig.ErrUnavailable when package imds's source
//     would be unavailable with Config.IMDS (the host is not an EC2
//     instance, and no IMDS endpoint is set), or when no credentials can
//     be had: none configured, none in the environment or the shared
//     files, and IMDS, which serves the instance profile's, disabled;
//   - nil otherwise. Whether the instance has an instance profile, and
//     what its role may do, can only be asked of IMDS and the API: Watch
//     finds out, and reports it in Notifier.Status.
func (s *Source) Available() error {
	if err := s.cfg.validate(); err != nil {
		return err
	}
	cfg := s.cfg.withDefaults()
	if err := imds.New(cfg.IMDS).Available(); err != nil {
		if errors.Is(err, termsig.ErrUnavailable) {
			return fmt.Errorf("asg: %w", err)
		}
		return fmt.Errorf("asg: Config.IMDS: %w", err)
	}
	if cfg.Credentials == nil && cfg.IMDS.Endpoint == "" && strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") && !localCredentials() {
		return fmt.Errorf("asg: no credentials: none in the environment or the shared files, and AWS_EC2_METADATA_DISABLED keeps the instance profile's: %w", termsig.ErrUnavailable)
	}
	return nil
}

// localCredentials reports whether the environment or the shared files
// may give credentials without IMDS.
func localCredentials() bool {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return false
	}
	for _, f := range []string{".aws/credentials", ".aws/config"} {
		if _, err := os.Stat(home + "/" + f); err == nil {
			return true
		}
	}
	return false
}

// Watch watches autoscaling/target-lifecycle-state through package imds's
// polling (Config.IMDS) until ctx is done. When it turns Terminated (a
// scale-in picked this instance) it sends one Terminate, Event
// "asg/lifecycle":
//
//   - Held, when termination hooks of the instance's group (those of
//     Config.Hooks) hold it: the source records a heartbeat on each at
//     once, and Deadline is when the first of them times out from that
//     heartbeat (HeartbeatTimeout later). HoldLimit is when the wait
//     began plus the shortest limit of the hooks (min(48 h, 100 ×
//     HeartbeatTimeout, GlobalTimeout)), or plus Config.MaxHold if that
//     is shorter (when it is shorter than a hook's timeout, no heartbeat
//     is sent, and Deadline and HoldLimit are the hook's own end). The
//     wait's start is the termination activity's StartTime
//     (DescribeScalingActivities), or else when the state was seen, less
//     Config.IMDS's AdvisoryInterval. Until Release it records a heartbeat
//     on each hook every third of its HeartbeatTimeout, while that does
//     not pass HoldLimit, and sends the notice again with each new
//     Deadline.
//   - not Held, without a Deadline, when no termination hook holds the
//     instance, when only hooks whose HeartbeatTimeout is not one Auto
//     Scaling allows do (Release completes them), or when the API could
//     not be asked within Config.RequestTimeout (the Reason says which;
//     Notifier.Status shows the error). In the last case it goes on
//     asking within the hold, with the hooks of its first look if the
//     API does not describe them, and sends the notice again, Held, once
//     it has the hold.
//
// Its heartbeats never wait for the consumer: while Notifier.C is full, a
// later notice replaces the one not yet delivered. A hold that ends
// before Release (heartbeats that fail until the Deadline, or the API
// saying that no hook's action waits: the instance went on) is logged at
// level Warn and sent once more, not Held, with Deadline the time it
// ended. Failures of the API (throttling, timeouts, AccessDenied, which
// names the IAM action) are retried with backoff and reported with
// [termsig.Run.Report]; no Terminate comes from the API alone. Stop does
// not complete the hooks: their DefaultResult applies at their timeout.
//
// Its first look is package imds's first look at the lifecycle state.
// Watch returns at once the error of [Source.Available], if any.
func (s *Source) Watch(ctx context.Context, r *termsig.Run) error {
	if err := s.Available(); err != nil {
		return err
	}
	cfg := s.cfg.withDefaults()
	inner := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(imds.New(cfg.IMDS))
	defer inner.Stop()
	s.mu.Lock()
	s.watching++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.watching--
		s.mu.Unlock()
		s.idle()
	}()
	newWatcher(s, cfg, r, inner).run(ctx)
	return ctx.Err()
}

// Release completes, with CONTINUE, the lifecycle action of this instance
// on every termination hook that holds it (those of Config.Hooks), so that
// the instance goes at once instead of at the hooks' timeout, and ends the
// heartbeats. It does nothing for a notice of another Event, or when the
// source holds nothing (no scale-in seen, no hook). Calls that fail are
// tried again, with backoff, until they succeed or ctx is done; a hook
// whose action is over already counts as done, and AccessDenied is
// returned at once. It may be called after Watch has returned: the hooks
// are then completed all the same.
func (s *Source) Release(ctx context.Context, n termsig.Notice) error {
	if n.Event != Event {
		return nil
	}
	s.mu.Lock()
	h, scaled := s.holding, s.scaled
	s.mu.Unlock()
	if !scaled {
		return nil
	}
	cfg := s.cfg.withDefaults()
	defer s.idle()
	if h == nil {
		// The scale-in was seen but the hold was not had (the API
		// failed): find the hooks now.
		var err error
		if h, err = s.find(ctx, cfg); err != nil || h == nil {
			return err
		}
	}
	s.mu.Lock()
	s.released = true
	s.mu.Unlock()
	cl, err := s.clients(ctx, cfg)
	if err != nil {
		return err
	}
	errs := make([]error, len(h.hooks))
	var wg sync.WaitGroup
	for i, hk := range h.hooks {
		wg.Go(func() {
			b := cfg.retryOff(hk)
			for {
				err := cl.complete(ctx, cfg.RequestTimeout, h.group, h.id, hk)
				if err == nil || noAction(err) {
					return
				}
				if denied(err) || !backoff.Sleep(ctx, b.Next()) {
					errs[i] = fmt.Errorf("hook %s: %w", hk.name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// find looks up the group and its termination hooks, for a Release whose
// hold was never had, trying again with backoff until ctx is done; the
// hooks last read stand in for an answer that does not come.
func (s *Source) find(ctx context.Context, cfg Config) (*hold, error) {
	b := backoff.Backoff{Base: cmp.Or(cfg.backoffBase, 100*time.Millisecond), Max: time.Second, Jitter: true}
	for {
		h, err := s.findOnce(ctx, cfg)
		if err == nil || denied(err) || !backoff.Sleep(ctx, b.Next()) {
			return h, err
		}
	}
}

func (s *Source) findOnce(ctx context.Context, cfg Config) (*hold, error) {
	cl, err := s.clients(ctx, cfg)
	if err != nil {
		return nil, err
	}
	id, group, err := s.where(ctx, cfg, cl)
	if err != nil || group == "" {
		return nil, err
	}
	hooks, err := s.readHooks(ctx, cfg, cl, group)
	if len(hooks) == 0 {
		return nil, err
	}
	return &hold{group: group, id: id, hooks: hooks}, nil
}

// readHooks reads the termination hooks of group, and keeps them; when
// the API does not answer it returns those last read, if any, with the
// error.
func (s *Source) readHooks(ctx context.Context, cfg Config, cl *clients, group string) ([]hook, error) {
	hooks, err := cl.hooks(ctx, cfg.RequestTimeout, group, cfg.Hooks)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return s.hooks, err
	}
	s.hooks = hooks
	return hooks, nil
}

// clients returns the Source's SDK clients, made on first need. Making
// them may ask IMDS for the region: other callers wait for that within
// their own ctx, never holding the Source's lock.
func (s *Source) clients(ctx context.Context, cfg Config) (*clients, error) {
	for {
		s.mu.Lock()
		if s.cl != nil {
			cl := s.cl
			s.mu.Unlock()
			return cl, nil
		}
		if b := s.building; b != nil {
			s.mu.Unlock()
			select {
			case <-b:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("asg: the AWS configuration: %w", context.Cause(ctx))
			}
		}
		b := make(chan struct{})
		s.building = b
		s.mu.Unlock()
		cl, err := newClients(ctx, cfg)
		s.mu.Lock()
		s.cl, s.building = cl, nil
		s.mu.Unlock()
		close(b)
		return cl, err
	}
}

// idle closes the clients' idle connections when no Watch runs: a Release
// after Stop leaves none open.
func (s *Source) idle() {
	s.mu.Lock()
	cl, watching := s.cl, s.watching
	s.mu.Unlock()
	if cl != nil && watching == 0 {
		cl.release()
	}
}

// where returns this instance's id and group, asking IMDS and the API
// what is not known yet; group is "" when the API knows the instance in
// no group.
func (s *Source) where(ctx context.Context, cfg Config, cl *clients) (id, group string, err error) {
	s.mu.Lock()
	id, group = s.id, s.group
	s.mu.Unlock()
	if id == "" {
		if id = cfg.InstanceID; id == "" {
			if id, err = cl.instanceID(ctx, cfg.RequestTimeout); err != nil {
				return "", "", err
			}
		}
	}
	if group == "" {
		if group, _, err = cl.group(ctx, cfg.RequestTimeout, id); err != nil {
			return id, "", err
		}
	}
	s.mu.Lock()
	s.id, s.group = id, group
	s.mu.Unlock()
	return id, group, nil
}

var (
	_ termsig.Detector = (*Source)(nil)
	_ termsig.Releaser = (*Source)(nil)
)
