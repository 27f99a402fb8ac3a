// Package kubetest runs a real etcd and a real kube-apiserver on loopback
// for the length of one test, and hands back clients for them: an admin
// client, and configs that authenticate as a service account, so that a
// test can check RBAC manifests against the real authorizer.
//
// # What runs, and what does not
//
// Only the API server and its store run: no scheduler, no controller
// manager, no kubelet. Objects are validated, stored and watched, and RBAC
// is enforced, but nothing acts on what is stored, and no status is
// written but the test's (UpdateStatus, as the admin):
//
//   - a Pod keeps the spec.nodeName it was created with, and stays Pending;
//   - a Pod bound to a node and deleted (or evicted) with a grace period
//     stays, terminating, until someone deletes it with a grace period of
//     zero, since no kubelet is there to confirm that it stopped;
//   - the eviction API ignores PodDisruptionBudgets for Pending Pods. For
//     a Running one it heeds a budget's status, which no disruption
//     controller computes: until the test sets status.observedGeneration
//     to the budget's generation, the answer is 429 with Retry-After: 10,
//     which client-go retries ten times, so that the call blocks for
//     about 100 s;
//   - a deleted Namespace stays Terminating;
//   - no ServiceAccount "default" is made; the ServiceAccount admission
//     plugin is off, so that Pods need none.
//
// # Binaries
//
// [Start] runs etcd and kube-apiserver [Version], found by [Binaries]. In
// the termsig repository, .ci/deps installs etcd and builds kube-apiserver
// where Binaries looks for it. Without them, Start fails the test, or
// skips it under go test -short. Start skips the test on systems other
// than Linux.
package kubetest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Version is the version of kube-apiserver that [Binaries] looks for in
// the cache: the Kubernetes release whose client-go kubedrain uses.
const Version = "v1.37.2"

const (
	readyTimeout = 60 * time.Second       // for both to start; ~3 s is usual
	readyPoll    = 100 * time.Millisecond // between GET /readyz
	stopTimeout  = 5 * time.Second        // from SIGTERM to SIGKILL
	logTail      = 40                     // lines of each log shown on failure
)

// Binaries returns the paths of the etcd and kube-apiserver that [Start]
// runs: those that the environment variables TERMSIG_ETCD and
// TERMSIG_KUBE_APISERVER name, when set; else etcd from PATH, and
// kube-apiserver [Version] where .ci/kube-apiserver builds it,
// [os.UserCacheDir]/termsig-kube/kube-apiserver-<Version>. Its error
// names what is missing and says how to get it.
func Binaries() (etcd, kubeAPIServer string, err error) {
	etcd, etcdErr := exec.LookPath(cmp.Or(os.Getenv("TERMSIG_ETCD"), "etcd"))
	kubeAPIServer = os.Getenv("TERMSIG_KUBE_APISERVER")
	if kubeAPIServer == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", "", fmt.Errorf("kubetest: kube-apiserver: %w", err)
		}
		kubeAPIServer = filepath.Join(cache, "termsig-kube", "kube-apiserver-"+Version)
	}
	kubeAPIServer, apiErr := exec.LookPath(kubeAPIServer)
	if err := errors.Join(etcdErr, apiErr); err != nil {
		return "", "", fmt.Errorf("kubetest: %w\n"+
			"run .ci/deps in the termsig repository: it installs etcd and builds kube-apiserver %s "+
			"(or set TERMSIG_ETCD and TERMSIG_KUBE_APISERVER)", err, Version)
	}
	return etcd, kubeAPIServer, nil
}

// Cluster is an etcd and a kube-apiserver started by [Start]. They stop
// when the test that started them ends.
type Cluster struct {
	// Config is an admin's: a user in group system:masters, which RBAC
	// lets do anything. It trusts the API server's self-signed
	// certificate. Copy it before changing it.
	Config *rest.Config
	// Client is a client made from Config.
	Client kubernetes.Interface

	// http carries Client's requests, and the GET /readyz polls, which
	// go around Client's rate limiter (5 a second, a controller's pace).
	http *http.Client
}

// Start starts an etcd and a kube-apiserver listening on loopback, with
// their files in a directory from t.TempDir, and returns once the API
// server reports ready (GET /readyz answers ok), which takes a few
// seconds. It fails the test if they do not become ready within a minute
// or if either exits first. When the test ends, a cleanup stops both
// (SIGTERM, then SIGKILL after a few seconds), waits for them, and, if the
// test failed, logs the last lines of each one's output. With the server
// gone, the connections of every client of it close, and so end their
// goroutines.
//
// Start fails the test when [Binaries] finds no binaries, or skips it
// under go test -short. It skips the test on systems other than Linux,
// where it cannot make sure that no child outlives the test binary.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("kubetest: needs Linux")
	}
	etcdBin, apiBin, err := Binaries()
	if err != nil {
		if testing.Short() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	ports := freePorts(t, 3)
	etcdURL := "http://127.0.0.1:" + ports[0]
	peerURL := "http://127.0.0.1:" + ports[1]
	token := writeSecrets(t, dir)

	etcd := startProcess(t, dir, "etcd", etcdBin,
		"--name", "kubetest",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kubetest="+peerURL,
		"--logger", "zap", "--log-level", "warn")
	apiserver := startProcess(t, dir, "kube-apiserver", apiBin, apiserverArgs(dir, etcdURL, ports[2])...)

	c := &Cluster{}
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	host := "https://127.0.0.1:" + ports[2]
	if err := c.waitReady(ctx, dir, host, token, etcd, apiserver); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return c
}

// apiserverArgs are the flags of a kube-apiserver on 127.0.0.1:port that
// uses the files that writeSecrets wrote into dir.
func apiserverArgs(dir, etcdURL, port string) []string {
	key := filepath.Join(dir, "sa.key")
	return []string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1",
		"--secure-port", port,
		"--cert-dir", filepath.Join(dir, "certs"),
		"--service-account-key-file", key,
		"--service-account-signing-key-file", key,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--authorization-mode", "RBAC",
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		// No controller manager makes the ServiceAccount "default" that
		// this plugin would require of every Pod.
		"--disable-admission-plugins", "ServiceAccount",
		"--service-cluster-ip-range", "10.0.0.0/24",
		"-v=0",
	}
}

// writeSecrets writes into dir the key that signs service account tokens
// (sa.key) and the file of static tokens (tokens.csv) with one token, in
// group system:masters, which it returns.
func writeSecrets(t testing.TB, dir string) (adminToken string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	adminToken = rand.Text()
	line := adminToken + ",kubetest-admin,kubetest-admin,system:masters\n"
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return adminToken
}

// freePorts returns n distinct ports free on 127.0.0.1 a moment ago. Some
// other process may take one before our child binds it; that race is rare
// enough (the kernel hands out ephemeral ports in turn) to accept.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	ports := make([]string, n)
	for i := range ports {
		// Held open until all are chosen, so that the n differ.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// waitReady returns once the API server at host answers GET /readyz with
// ok, having set c's Config and clients on the way. It returns an error
// when ctx ends first or when either process exits.
func (c *Cluster) waitReady(ctx context.Context, dir, host, token string, etcd, apiserver *process) error {
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		why := c.probe(ctx, dir, host, token)
		if why == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after %v: %v", readyTimeout, why)
		case <-etcd.done:
			return fmt.Errorf("etcd exited while starting: %v", etcd.err)
		case <-apiserver.done:
			return fmt.Errorf("kube-apiserver exited while starting: %v", apiserver.err)
		case <-tick.C:
		}
	}
}

// probe returns nil if the API server is ready, else why it is not.
func (c *Cluster) probe(ctx context.Context, dir, host, token string) error {
	if c.Config == nil {
		if err := c.connect(dir, host, token); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	// While not ready, /readyz lists every check; only "ok" means ready.
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("GET /readyz: %s: %s", resp.Status, failedChecks(body))
	}
	return nil
}

// failedChecks returns the lines of a /readyz answer that name a failed
// check ("[-]etcd failed: ..."), or the whole answer if none do.
func failedChecks(body []byte) []byte {
	var failed [][]byte
	for line := range bytes.Lines(body) {
		if bytes.HasPrefix(line, []byte("[-]")) {
			failed = append(failed, bytes.TrimSpace(line))
		}
	}
	if failed == nil {
		return bytes.TrimSpace(body)
	}
	return bytes.Join(failed, []byte("; "))
}

// connect sets c's Config and clients, once the API server has written the
// self-signed certificate that they are to trust into dir/certs.
func (c *Cluster) connect(dir, host, token string) error {
	certs := filepath.Join(dir, "certs")
	// The API server writes the key after the certificate, so once the
	// key is there the certificate is whole.
	if _, err := os.Stat(filepath.Join(certs, "apiserver.key")); err != nil {
		return fmt.Errorf("no serving certificate yet: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(certs, "apiserver.crt"))
	if err != nil {
		return err
	}
	cfg := &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		// No client-side rate limit (client-go's default is 5 requests a
		// second): a test that sets up twenty pods should not wait for it.
		QPS: -1}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return err
	}
	c.Config, c.Client, c.http = cfg, client, hc
	return nil
}

// ServiceAccountConfig returns a config that authenticates as the
// ServiceAccount namespace/name, with a token from the TokenRequest API
// valid for an hour, so that a test can check what RBAC lets it do. The
// ServiceAccount must exist: it is not created here, so that a test which
// applies a manifest also checks that the manifest creates it.
func (c *Cluster) ServiceAccountConfig(t testing.TB, namespace, name string) *rest.Config {
	t.Helper()
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: token for service account %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// Kubeconfig writes a kubeconfig file for cfg (its server, the CA it
// trusts, its token or client certificate) into a directory of
// t.TempDir, and returns its path: for a program run by the test with
// --kubeconfig. The file is removed when the test ends.
func (c *Cluster) Kubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	const name = "kubetest"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return path
}

// process is a child started by startProcess.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string        // the file of its stdout and stderr
	done chan struct{} // closed once cmd.Wait has returned
	err  error         // cmd.Wait's; read it only after done is closed
}

// startProcess starts bin with args in dir, its output going to
// dir/<name>.log, and registers a cleanup that stops it.
func startProcess(t testing.TB, dir, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	// The child gets a descriptor of its own: ours only hands it over.
	defer f.Close()
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = f, f // an *os.File: no copying goroutine
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends p SIGTERM, kills it if it has not exited stopTimeout later,
// and waits for it. If the test failed, it logs the end of p's output.
func (p *process) stop(t testing.TB) {
	early := false
	select {
	case <-p.done:
		early = true
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-p.done:
		case <-timer.C:
			t.Logf("kubetest: %s still running %v after SIGTERM: killing it", p.name, stopTimeout)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	if t.Failed() {
		if early {
			t.Logf("kubetest: %s had exited before the test ended: %v", p.name, p.err)
		}
		p.logTail(t)
	}
}

// logTail logs the last logTail lines of p's output.
func (p *process) logTail(t testing.TB) {
	out, err := os.ReadFile(p.log)
	if err != nil {
		t.Logf("kubetest: %s's output: %v", p.name, err)
		return
	}
	if len(out) == 0 {
		t.Logf("kubetest: %s wrote nothing", p.name)
		return
	}
	lines := bytes.Split(bytes.TrimRight(out, "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-logTail):]
	t.Logf("kubetest: the last %d lines of %s's output:\n%s", len(lines), p.name, bytes.Join(lines, []byte("\n")))
}
