package ghfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// runnerVersion is the version the fake listener says it is.
const runnerVersion = "2.329.0"

// What the listener prints, as the real one does.
const (
	notConfigured = "An error occurred: Not configured. Run config.(sh/cmd) to configure the runner."
	accessDenied  = "An error occurred: Access denied. System:ServiceIdentity;DDDDDDDD-DDDD-DDDD-DDDD-DDDDDDDDDDDD " +
		"needs View permissions to perform the action."
	registrationDeleted = "Failed to create a session. The runner registration has been deleted from the server, " +
		"please re-configure. Runner registrations are automatically deleted for runners that have not " +
		"connected to the service recently."
)

// Connecting: a listener that cannot reach the server tries this many
// times, waiting firstRetry, then twice as long each time (1.5 s in all),
// then exits 1.
const (
	connectTries = 5
	firstRetry   = 100 * time.Millisecond
	// callTimeout bounds each of the listener's requests but its session.
	callTimeout = 10 * time.Second
)

// The listener's exit statuses, as the real one's, which run-helper.sh
// reads: 0 when it stopped, 1 on an error that a restart would not cure,
// 5 when another listener holds the runner's session.
const (
	exitStopped         = 0
	exitTerminated      = 1
	exitSessionConflict = 5
	// interrupted is connect's status when the listener was told to stop.
	interrupted = -1
)

// A listener is the fake Runner.Listener. Only its own goroutine uses it.
type listener struct {
	out       io.Writer
	root      string // the server's root URL
	id        int64
	name      string
	secret    string
	ephemeral bool
	client    *http.Client
	job       *jobEvent   // the job it runs, if any
	timer     *time.Timer // ends job, if it has a duration
}

// listen runs the listener of the runner configured in dir until ctx ends
// (it then stops cleanly and returns exitStopped), it ran its one job as
// an ephemeral runner (exitStopped), it cannot go on (exitTerminated), or
// another listener holds the runner's session (exitSessionConflict).
func listen(ctx context.Context, dir string, out io.Writer) int {
	l, err := loadListener(dir, out)
	if err != nil {
		fmt.Fprintln(out, err)
		return exitTerminated
	}
	defer l.client.CloseIdleConnections()
	st, code := l.connect(ctx)
	if code == interrupted {
		fmt.Fprintln(out, "Exiting...")
		return exitStopped
	}
	if st == nil {
		return code
	}
	fmt.Fprint(out, "√ Connected to GitHub\n\n")
	fmt.Fprintf(out, "Current runner version: '%s'\n", runnerVersion)
	l.say("Listening for Jobs")
	return l.loop(ctx, st)
}

// loadListener reads the registration in dir's .runner and .credentials.
func loadListener(dir string, out io.Writer) (*listener, error) {
	var rc runnerConfig
	var cred credentials
	err := readJSONFile(filepath.Join(dir, runnerFile), &rc)
	if err == nil {
		err = readJSONFile(filepath.Join(dir, credentialsFile), &cred)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, runnerMsgf(notConfigured)
	case err != nil:
		return nil, runnerMsgf("An error occurred: %v", err)
	}
	root, ok := strings.CutSuffix(rc.ServerURL, pipelinesPath)
	if !ok || root == "" {
		return nil, runnerMsgf("An error occurred: %s: serverUrl %q is not the fake server's", runnerFile, rc.ServerURL)
	}
	return &listener{
		out: out, root: root, id: rc.AgentID, name: rc.AgentName, secret: cred.Data.ClientID,
		ephemeral: rc.Ephemeral, client: &http.Client{Transport: newTransport()},
	}, nil
}

// newTransport returns a transport of its own, for loopback without proxy.
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		ResponseHeaderTimeout: callTimeout,
		MaxIdleConnsPerHost:   2,
	}
}

// say prints msg with the time, as the listener does.
func (l *listener) say(msg string) {
	fmt.Fprintf(l.out, "%s: %s\n", time.Now().UTC().Format("2006-01-02 15:04:05Z"), msg)
}

// connect opens a session, trying a few times. It returns the session,
// or nil and the exit status, interrupted if ctx ended. A session that
// another listener of the runner holds still after the last try ends the
// listener with exitSessionConflict, as the real one after four minutes.
func (l *listener) connect(ctx context.Context) (*stream, int) {
	delay := firstRetry
	for try := 1; ; try++ {
		st, err := l.open(ctx)
		var denied *deniedError
		var conflict *conflictError
		switch {
		case err == nil:
			return st, exitStopped
		case ctx.Err() != nil:
			return nil, interrupted
		case errors.As(err, &denied):
			fmt.Fprintln(l.out, accessDenied)
			return nil, exitTerminated
		case try == connectTries && errors.As(err, &conflict):
			fmt.Fprintf(l.out, "Failed to create session. %s\n", conflict.msg)
			return nil, exitSessionConflict
		case try == connectTries:
			fmt.Fprintf(l.out, "An error occurred: %v\n", err)
			return nil, exitTerminated
		}
		l.say(fmt.Sprintf("Runner connect error: %s. Retrying until reconnected.", strings.TrimSuffix(err.Error(), ".")))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, interrupted
		}
		delay *= 2
	}
}

// A stream is an open session: its events, read by a goroutine of its
// own.
type stream struct {
	events chan event // closed when the session ends
	cancel context.CancelFunc
	done   chan struct{} // closed when the reading goroutine has returned
}

// open opens a session. The session outlives ctx, which only bounds the
// opening.
func (l *listener) open(ctx context.Context) (*stream, error) {
	u := fmt.Sprintf("%s/_fake/session?runner=%d", l.root, l.id)
	if l.job != nil {
		u += fmt.Sprintf("&job=%d", l.job.ID)
	}
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	resp, err := l.do(sctx, http.MethodGet, u, nil)
	if !stop() || err != nil {
		cancel()
		if err == nil {
			resp.Body.Close()
			err = ctx.Err()
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		return nil, answerError(resp)
	}
	st := &stream{events: make(chan event), cancel: cancel, done: make(chan struct{})}
	go st.read(sctx, resp.Body)
	return st, nil
}

// read passes the session's events on until it ends or ctx does.
func (st *stream) read(ctx context.Context, body io.ReadCloser) {
	defer close(st.done)
	defer close(st.events)
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var ev event
		if dec.Decode(&ev) != nil {
			return
		}
		select {
		case st.events <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// close ends the session and waits for its goroutine. It may be called
// more than once.
func (st *stream) close() {
	st.cancel()
	<-st.done
}

// do sends a request with the runner's credential.
func (l *listener) do(ctx context.Context, method, url string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.secret)
	req.Header.Set("Content-Type", "application/json")
	return l.client.Do(req)
}
