package main

// Tests of the logind source in kubedrain: the DaemonSet gives it the
// host's system bus, read-only, and kubedrain drains on a host shutdown
// without holding the shutdown itself (logind.Config.NoLock): the
// kubelet's graceful node shutdown holds it.

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestDaemonSetMountsTheSystemBusReadOnly: the DaemonSet of deploy/
// mounts the host's /run/dbus, and nothing else of the host, read-only,
// and points the logind source at the system bus's socket in it; the
// address is one the source accepts.
func TestDaemonSetMountsTheSystemBusReadOnly(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("deploy", "daemonset.yaml"))
	require.NoError(t, err)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	require.NoError(t, err)
	spec := obj.(*appsv1.DaemonSet).Spec.Template.Spec

	var host []corev1.Volume
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			host = append(host, v)
		}
	}
	require.Len(t, host, 1, "host paths mounted: %+v", host)
	bus := host[0]
	assert.Equal(t, "/run/dbus", bus.HostPath.Path)
	require.NotNil(t, bus.HostPath.Type)
	assert.Equal(t, corev1.HostPathDirectoryOrCreate, *bus.HostPath.Type,
		"a host without D-Bus must still run kubedrain (type Socket would keep the pod from starting)")

	require.Len(t, spec.Containers, 1)
	ctr := spec.Containers[0]
	i := slices.IndexFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == bus.Name })
	require.GreaterOrEqual(t, i, 0, "the bus volume is not mounted")
	mount := ctr.VolumeMounts[i]
	assert.True(t, mount.ReadOnly, "the system bus is mounted read-write")
	assert.Equal(t, "/run/dbus", mount.MountPath)

	i = slices.IndexFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == "DBUS_SYSTEM_BUS_ADDRESS" })
	require.GreaterOrEqual(t, i, 0, "DBUS_SYSTEM_BUS_ADDRESS is not set")
	addr := ctr.Env[i].Value
	path, ok := strings.CutPrefix(addr, "unix:path=")
	require.True(t, ok, "%q is not a unix:path= address", addr)
	assert.Equal(t, mount.MountPath, filepath.Dir(path), "the socket is not in the mounted directory")
	// On this host the socket may not be there: unavailable is fine, a
	// configuration that can never work is not.
	if err := logind.New(logind.Config{Address: addr}).Available(); err != nil {
		assert.ErrorIs(t, err, termsig.ErrUnavailable)
	}
	assert.True(t, *ctr.SecurityContext.ReadOnlyRootFilesystem)
	assert.True(t, *ctr.SecurityContext.RunAsNonRoot)
}

// TestHostShutdownDrainsWithoutALockOfItsOwn: kubedrain as a separate
// process, with --sources logind on a system bus where a fake logind runs
// and the kubelet's graceful node shutdown holds its delay lock, against
// a real API server with the RBAC of deploy/: a poweroff cordons, taints
// and labels the node and evicts its pods with grace periods that end
// before logind's InhibitDelayMaxSec (the kubelet's shutdownGracePeriod)
// less the margin; and kubedrain never takes a lock of its own, so the
// host waits for the kubelet's lock alone.
func TestHostShutdownDrainsWithoutALockOfItsOwn(t *testing.T) {
	bus, fake := logindtest.Start(t, logindtest.Config{InhibitDelayMax: 2 * time.Minute})
	// The kubelet: New returns once its lock is held.
	kubelet := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(logind.New(logind.Config{
		Address: bus.Address(), Who: "kubelet", Why: "Kubelet needs time to handle node shutdown",
	}))
	defer kubelet.Stop()
	require.Len(t, fake.Held(), 1, "the kubelet's lock")

	c, kubeconfig := setupCluster(t)
	for _, p := range []*corev1.Pod{
		newPod("work", "slow", grace(600)),
		newPod("work", "quick", grace(5)),
	} {
		createRunningPod(t, c.Client, p)
	}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.Address())
	// "watching" comes once the logind source has subscribed: termsig.New
	// waits for the first look of a source whose first look is local.
	startKubedrain(t, kubeconfig, "", "--sources", "logind")
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	announced := time.Now()

	untilNode(t, c.Client, "cordoned, tainted and labelled for the poweroff", func(n *corev1.Node) bool {
		v, _ := excludeLabel(n)
		return n.Spec.Unschedulable && hasTaint(n, "terminate") && v == ExcludeValue
	})
	pods := untilPods(t, c.Client, "work", "evictions", terminating("work/slow", "work/quick"))
	m := byName(pods)
	assert.Equal(t, int64(5), *m["work/quick"].DeletionGracePeriodSeconds)
	// 600 s capped by the two minutes of InhibitDelayMaxSec less the 10 s
	// margin, less the time the drain took to start.
	slow := *m["work/slow"].DeletionGracePeriodSeconds
	assert.LessOrEqual(t, slow, int64(110))
	assert.GreaterOrEqual(t, slow, int64(110-time.Since(announced)/time.Second-1))

	locks := fake.Inhibitors()
	assert.Len(t, locks, 1, "kubedrain took a lock: %+v", locks)
	for _, l := range locks {
		assert.Equal(t, "kubelet", l.Who, "a lock not the kubelet's: %+v", l)
	}
	assert.Len(t, fake.Held(), 1, "the kubelet's lock is not held any more")
}
