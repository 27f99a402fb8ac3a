package sources_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/asg"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/sources"
)

// On EC2, imds leaves the lifecycle state to asg: a scale-in is one
// notice, from asg, whether chosen by Detect or named with ByName.
func TestScaleInIsOneNotice(t *testing.T) {
	srv := imdstest.NewServer()
	t.Cleanup(srv.Close)
	srv.SetRole("worker")
	srv.SetLifecycleState("Terminated")
	// An Auto Scaling API that refuses connections: asg sends the
	// notice from IMDS alone.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	api := "http://" + l.Addr().String()
	l.Close()
	clean(t)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	cfg := sources.Config{
		PlatformOnly: true,
		Root:         fakeRoot(t, map[string]string{"sys_vendor": "Amazon EC2"}),
		IMDS:         imds.Config{Endpoint: srv.URL, Interval: 10 * time.Millisecond, AdvisoryInterval: 10 * time.Millisecond},
		ASG:          asg.Config{Endpoint: api, RequestTimeout: 200 * time.Millisecond},
	}
	byName, err := sources.ByName(cfg, "imds", "asg")
	require.NoError(t, err)
	for name, srcs := range map[string][]termsig.Source{"Detect": sources.Detect(cfg), "ByName": byName} {
		t.Run(name, func(t *testing.T) {
			log := testlog.New()
			n := termsig.Config{Logger: log.Logger()}.New(srcs...)
			<-n.Ready()
			n.Stop()
			var got []termsig.Notice
			for nt := range n.C() {
				got = append(got, nt)
			}
			require.Len(t, got, 1, "%v", got)
			assert.Equal(t, asg.Name, got[0].Source)
			assert.Equal(t, asg.Event, got[0].Event)
			assert.False(t, got[0].Held)
		})
	}
}
