package sources

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/asg"
	"github.com/termsig/termsig/imds"
)

// A Choice is what [Detect] decides about one source, and why.
type Choice struct {
	// Source is the source, configured by the Config as Detect configures
	// it, whether it is chosen or not.
	Source termsig.Source

	// Chosen reports whether Detect returns the source.
	Chosen bool

	// Err says why a source is left out: the error of its Available,
	// which wraps termsig.ErrUnavailable and says what was read (the
	// firmware's strings, the socket that is missing), or that
	// PlatformOnly leaves out a source that watches this process only.
	// A chosen source has a nil Err, or the error of a Config that cannot
	// work: it is chosen so that the mistake shows, and its Watch fails
	// at once with that error.
	Err error
}

// Explain returns Detect's choice about each source this package knows, in
// Detect's order (see [Names]); Detect returns the Source of each chosen
// one. It reads the same local facts as Detect, as quickly and without the
// network. Explain itself logs nothing, unlike Detect; but it calls each
// source's Available, which logs as the source's Config says: acpi logs
// at debug level each power-button transport and input device it finds
// unusable, on cfg.ACPI.Logger, else cfg.Logger, else slog.Default().
func Explain(cfg Config) []Choice {
	choices := make([]Choice, len(known))
	for i, k := range known {
		s := k.build(cfg)
		c := Choice{Source: s, Chosen: true}
		switch d, ok := s.(termsig.Detector); {
		case cfg.PlatformOnly && local(s):
			c.Chosen, c.Err = false, fmt.Errorf("sources: %s watches this process only, and PlatformOnly is set", k.name)
		case ok:
			c.Err = d.Available()
			c.Chosen = applies(c.Err)
		}
		choices[i] = c
	}
	// A scale-in is one notice: when asg works, imds leaves the
	// lifecycle state to it.
	if i := slices.IndexFunc(choices, func(c Choice) bool { return c.Source.Name() == asg.Name }); i >= 0 && choices[i].Chosen && choices[i].Err == nil {
		for j := range choices {
			if choices[j].Source.Name() == imds.Name {
				choices[j].Source = imds.New(imdsConfig(leaveLifecycle(cfg)))
			}
		}
	}
	return choices
}

// A Look is how the first look of one source went (see [FirstLook]).
type Look struct {
	// Name is the source's name.
	Name string

	// Ready reports whether the source had its first look (it called
	// termsig.Run.Ready, or its Watch returned) before the context ended.
	Ready bool

	// Took is the time from the start of the source until it was Ready,
	// or until the context ended.
	Took time.Duration

	// State and Err are the source's, as termsig.Notifier.Status shows
	// them at that moment. A source that answered is running with a nil
	// Err. One whose first look failed is running with the error it
	// reported (it goes on retrying), or has failed with the error its
	// Watch returned (a Config that cannot work), or is unavailable with
	// an error wrapping termsig.ErrUnavailable: it found out that it does
	// not apply (logind with no systemd-logind on the bus). One that is
	// not Ready is running, with the last error it reported, if any.
	State termsig.State
	Err   error

	// Notices are the notices the source sent before it was stopped, such
	// as a spot interruption that was already posted.
	Notices []termsig.Notice
}

// FirstLook starts each source of srcs in a termsig.Notifier of its own, all
// at once, and stops each once it has had its first look or ctx is done. It
// returns how each went, in the order of srcs, once every source has
// stopped: no goroutine of FirstLook or of the sources is left. It is as
// prompt as the sources' Watch methods are once cancelled (see
// termsig.Source).
//
// A first look is what the source does before it calls termsig.Run.Ready:
// the metadata sources make their first requests, and logind takes its
// delay lock (unless Config.Logind.NoLock is set) and closes it on return.
// The Notifiers log nothing, since the Looks say it all; the sources log as
// their Configs say. Like termsig.New, FirstLook panics on a nil source.
func FirstLook(ctx context.Context, srcs ...termsig.Source) []Look {
	for i, s := range srcs {
		if isNil(s) {
			panic("termsig: nil Source at index " + strconv.Itoa(i))
		}
	}
	looks := make([]Look, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Go(func() { looks[i] = look(ctx, s) })
	}
	wg.Wait()
	return looks
}

// look runs the first look of s. The source is wrapped so that its Traits
// do not show: termsig.New would otherwise wait for a source whose first
// look is local, for up to its ReadyTimeout and whatever ctx says, while
// here ctx alone bounds the wait.
func look(ctx context.Context, s termsig.Source) Look {
	l := Look{Name: s.Name()}
	start := time.Now()
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(bare{s})
	for waiting := true; waiting; {
		select {
		case nt := <-n.C():
			l.Notices = append(l.Notices, nt)
		case <-n.Ready():
			l.Ready, waiting = true, false
		case <-ctx.Done():
			waiting = false
			select { // a look that ended with ctx still counts
			case <-n.Ready():
				l.Ready = true
			default:
			}
		}
	}
	l.Took = time.Since(start)
	st := n.Status()[0]
	l.State, l.Err = st.State, st.Err
	n.Stop()
	for nt := range n.C() {
		l.Notices = append(l.Notices, nt)
	}
	return l
}

// isNil reports whether s is nil or holds a nil pointer, map, slice,
// function or channel, as termsig.New does: New sees s wrapped.
func isNil(s termsig.Source) bool {
	if s == nil {
		return true
	}
	switch v := reflect.ValueOf(s); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// bare is a source without its other methods (Traits, Release).
type bare struct{ termsig.Source }
