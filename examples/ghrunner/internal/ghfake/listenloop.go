package ghfake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// loop runs jobs as the session's events say, until ctx ends or the
// listener cannot go on; it returns the exit status.
func (l *listener) loop(ctx context.Context, st *stream) int {
	defer func() {
		if st != nil {
			st.close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return l.shutdown()
		case <-l.timerC():
			l.timer = nil
			if code, exit := l.finish(l.job.result()); exit {
				return code
			}
		case ev, ok := <-st.events:
			if ok {
				if code, exit := l.handle(ev); exit {
					return code
				}
				continue
			}
			st.close()
			var code int
			if st, code = l.connect(ctx); code == interrupted {
				return l.shutdown()
			} else if st == nil {
				return code
			}
			l.say("Runner reconnected.")
		}
	}
}

// timerC is the channel of the job's timer; nil (never ready) without one.
func (l *listener) timerC() <-chan time.Time {
	if l.timer == nil {
		return nil
	}
	return l.timer.C
}

// result is how a job that ran its Duration ends.
func (j *jobEvent) result() string {
	if j.Fail {
		return resultFailed
	}
	return resultSucceeded
}

// handle acts on an event; exit says whether the listener exits, with
// status code.
func (l *listener) handle(ev event) (code int, exit bool) {
	switch ev.Type {
	case eventJob:
		if l.job != nil || ev.Job == nil {
			return exitStopped, false
		}
		l.job = ev.Job
		l.say("Running job: " + l.job.Name)
		if l.job.Duration > 0 {
			l.timer = time.NewTimer(l.job.Duration)
		}
	case eventCancel:
		if l.job != nil && ev.JobID == l.job.ID {
			return l.finish(resultCancelled)
		}
	case eventFinish:
		if l.job != nil && ev.JobID == l.job.ID {
			return l.finish(l.job.result())
		}
	case eventDeleted:
		fmt.Fprintln(l.out, registrationDeleted)
		return exitTerminated, true
	}
	return exitStopped, false
}

// finish ends the job with result and says how GitHub recorded it, or
// Canceled for a job stopped by a signal, as the runner does. An
// ephemeral runner exits after its job.
func (l *listener) finish(result string) (code int, exit bool) {
	j := l.job
	l.job = nil
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	conclusion, err := l.complete(j.ID, result)
	if err != nil {
		fmt.Fprintf(l.out, "An error occurred: %v\n", err)
		return exitTerminated, true
	}
	word := resultWord(conclusion)
	if result == resultShutdown {
		// The runner cancels the job it runs when it is stopped, and says
		// so, even when GitHub records a failure (see ShutdownMessage).
		word = resultWord(ConclusionCancelled)
	}
	l.say(fmt.Sprintf("Job %s completed with result: %s", j.Name, word))
	return exitStopped, l.ephemeral
}

// resultWord is how the runner names a job's conclusion.
func resultWord(conclusion string) string {
	switch conclusion {
	case ConclusionSuccess:
		return "Succeeded"
	case ConclusionFailure:
		return "Failed"
	case ConclusionCancelled:
		return "Canceled"
	}
	return conclusion
}

// shutdown stops the listener on a signal: the job it runs, if any, is
// cancelled (GitHub records it cancelled if its run was, else failed),
// and the runner goes offline.
func (l *listener) shutdown() int {
	fmt.Fprintln(l.out, "Exiting...")
	if l.job != nil {
		l.finish(resultShutdown)
	}
	if err := l.offline(); err != nil {
		fmt.Fprintf(l.out, "An error occurred: %v\n", err)
	}
	return exitStopped
}

// complete reports the end of job id and returns its conclusion.
func (l *listener) complete(id int64, result string) (string, error) {
	body, err := json.Marshal(completeRequest{JobID: id, Result: result})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := l.do(ctx, http.MethodPost, fmt.Sprintf("%s/_fake/complete?runner=%d", l.root, l.id), body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		return "", answerError(resp)
	}
	var out completeResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRequest)).Decode(&out); err != nil {
		return "", err
	}
	return out.Conclusion, nil
}

// offline tells the server that the runner stops. A registration that is
// gone is offline already.
func (l *listener) offline() error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := l.do(ctx, http.MethodPost, fmt.Sprintf("%s/_fake/offline?runner=%d", l.root, l.id), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusForbidden {
		return nil
	}
	return answerError(resp)
}
