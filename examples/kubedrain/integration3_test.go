package main

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/termsig/termsig/imds/imdstest"
)

// A silencer is a TCP proxy whose connections can be made silently dead
// (half-open: a load balancer's failover, an API server instance gone
// without a reset); connections opened afterwards work.
type silencer struct {
	l     net.Listener
	mu    sync.Mutex
	flags []*atomic.Bool
}

func newSilencer(t *testing.T, target string) *silencer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &silencer{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			dead := &atomic.Bool{}
			s.mu.Lock()
			s.flags = append(s.flags, dead)
			s.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer dst.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !dead.Load() {
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return s
}

// silence makes every connection so far silently dead.
func (s *silencer) silence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flags {
		f.Store(true)
	}
}

// TestEvictionsSurviveAHalfOpenConnection: when kubedrain's connection to
// the API server goes silently dead mid-drain, the evictions go on over a
// new connection within seconds, not after client-go's HTTP/2 health
// check (30 s idle + 15 s ping: ~45 s of a spot interruption's 110 s).
// (Found by review.)
func TestEvictionsSurviveAHalfOpenConnection(t *testing.T) {
	c, _ := setupCluster(t)
	cfg := c.ServiceAccountConfig(t, "kube-system", "kubedrain")
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	s := newSilencer(t, u.Host)
	pc := rest.CopyConfig(cfg)
	pc.Host = "https://" + s.l.Addr().String()
	kubeconfig := c.Kubeconfig(t, pc)

	createRunningPod(t, c.Client, newPod("work", "guarded", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "guarded"} }))
	_, err = c.Client.PolicyV1().PodDisruptionBudgets("work").Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "work"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: new(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	setBudget(t, c.Client, "work", "guarded", 0)
	srv := imdstest.NewServer()
	defer srv.Close()
	kd := startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms")
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	kd.await(t, "kubedrain: eviction refused")
	s.silence()
	setBudget(t, c.Client, "work", "guarded", 1)
	start := time.Now()
	untilPods(t, c.Client, "work", "the guarded pod evicted", terminating("work/guarded"))
	assert.Less(t, time.Since(start), 20*time.Second,
		"the guarded pod evicted long after its budget allowed it: the drain was stuck on a dead connection")
}
