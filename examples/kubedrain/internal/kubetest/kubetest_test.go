package kubetest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/termsig/termsig/examples/kubedrain/internal/kubetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ns   = "drain"
	node = "node-1"
	sa   = "drainer"
)

func TestCluster(t *testing.T) {
	begin := time.Now()
	c := kubetest.Start(t)
	t.Logf("Start took %v", time.Since(begin).Round(time.Millisecond))

	ctx := t.Context()
	_, err := c.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.CoreV1().Nodes().Create(ctx,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, node, pod.Spec.NodeName)
	_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("RBAC", func(t *testing.T) { testRBAC(t, c) })
	t.Run("Kubeconfig", func(t *testing.T) { testKubeconfig(t, c) })
}

// testRBAC checks that the service account may do nothing until bound to
// roles, and then just what they allow.
func testRBAC(t *testing.T, c *kubetest.Cluster) {
	ctx := t.Context()
	client, err := kubernetes.NewForConfig(c.ServiceAccountConfig(t, ns, sa))
	require.NoError(t, err)
	getNode := func() error {
		_, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err
	}
	listPods := func(namespace string) error {
		_, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		return err
	}
	require.True(t, apierrors.IsForbidden(getNode()), "get node before binding: %v", getNode())
	require.True(t, apierrors.IsForbidden(listPods(ns)), "list pods before binding: %v", listPods(ns))

	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}
	rbac := c.Client.RbacV1()
	_, err = rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "drainer-node-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-reader"},
		Subjects:   subjects,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = rbac.Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-lister"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "drainer-pod-lister"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-lister"},
		Subjects:   subjects,
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The authorizer learns of bindings through a watch, a moment later.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, getNode(), "get node")
		assert.NoError(c, listPods(ns), "list pods in %s", ns)
	}, 10*time.Second, 20*time.Millisecond)
	err = listPods(metav1.NamespaceDefault)
	require.True(t, apierrors.IsForbidden(err), "list pods outside %s: %v", ns, err)
	err = client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "delete node: %v", err)
}

// testKubeconfig checks that a client loaded from a file that Kubeconfig
// wrote is who the config it was written from is.
func testKubeconfig(t *testing.T, c *kubetest.Cluster) {
	for _, tc := range []struct {
		name string
		cfg  *rest.Config
		user string
	}{
		{"admin", c.Config, "kubetest-admin"},
		{"service account", c.ServiceAccountConfig(t, ns, sa), "system:serviceaccount:" + ns + ":" + sa},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := c.Kubeconfig(t, tc.cfg)
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			require.NoError(t, err)
			client, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(),
				&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.user, review.Status.UserInfo.Username)
		})
	}
}
