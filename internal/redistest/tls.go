package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/freeport"
	"github.com/redfence/redfence/internal/redisnode"
)

// LockACL is the minimal ACL rule for a redfence lock client whose keys all
// start with "lock:" (WithKeyPrefix("lock:")): the key patterns of the lock
// keys, their fence hashes (core.FenceKey) and the restart-quarantine marker,
// and exactly the commands redfence sends (SET for an unfenced acquire
// without quarantine; EVALSHA, and EVAL when the script is not cached) and
// its scripts call (Redis 7 checks those against the caller's ACL too). It
// covers locking, fencing, the quarantine and Vouch in both packages; +pttl
// is needed by redlock only (its fence phase dates the key's grant). docs/topologies.md
// publishes it; TestACLRuleIsDocumented checks the two agree, and the
// TLS/ACL tests in single and redlock check that it suffices and that every
// part of it is needed.
const LockACL = "~lock:* ~{lock:*}:fence ~redfence:node" +
	" +set +get +del +pexpire +pttl +hget +hset +hmget +eval +evalsha +info +time +lastsave"

// WakeupACL is what the wake-up of waiting Lock calls (on by default)
// needs beyond LockACL, for the same prefix: the queue of waiters beside each
// lock key (a sorted set), PUBLISH of grants from the release script on the
// channels "redfence:released:" + the lock key, and SUBSCRIBE and
// UNSUBSCRIBE to them. Without it a client still locks and releases (the
// release script's queue part is a pcall); its waiting Lock calls then poll.
// docs/topologies.md publishes it; the TLS/ACL tests check both cases.
const WakeupACL = "~{lock:*}:queue +zadd +zrange +zrem +zcard &redfence:released:lock:* +publish +subscribe +unsubscribe"

// SemaphoreACL is what a semaphore (NewSemaphore) needs beyond LockACL, for
// the same prefix: the sorted-set commands its scripts call on the
// semaphore's key. docs/topologies.md publishes it; the TLS/ACL tests check
// that it suffices and that every part of it is needed.
const SemaphoreACL = "+zadd +zcard +zscore +zrem +zrange +zremrangebyscore"

// RWMutexACL is what a read-write lock (NewRWMutex) needs beyond LockACL,
// for the same prefix: the key pattern of the readers' sets and
// writer-intent markers of keys without their own hash tag
// ({lock:...}:rw:readers and {lock:...}:rw:intent: core.ReadersKey,
// core.IntentKey), and the commands its scripts call beyond the lock's: the
// sorted-set commands of the readers' set, EXISTS (the intent marker) and
// PEXPIREAT (the set ends with its last reader). docs/topologies.md
// publishes it; the TLS/ACL tests check that it suffices and that every
// part of it is needed.
const RWMutexACL = "~{lock:*}:rw:* +zadd +zcard +zscore +zrem +zrange +zremrangebyscore +exists +pexpireat"

// CheckACL is what Client.CheckNodes needs beyond LockACL: CONFIG GET
// (appendonly, appendfsync, maxmemory, maxmemory-policy) and INFO
// (replication), TIME (the clock offset), EVALSHA and EVAL (a script that
// reads the run id: it shows that the user may run scripts, and finds one
// server listed twice). CONFIG GET cannot be limited to those parameters and also
// reveals secrets such as masterauth, so it belongs to an operator user, not
// to the lock user.
const CheckACL = "+config|get +info +time +eval +evalsha"

// AdminUser is the ACL user with every permission on nodes started by TLS.
const AdminUser = "admin"

// TLSValidity is how long the certificates made by TLS are valid.
const TLSValidity = time.Hour

// User is an ACL user for TLS: its name and its ACL rules, without "on" and
// a password, which TLS adds.
type User struct {
	Name  string
	Rules string
}

// TLSNodes are redis-server nodes that accept only TLS connections from
// clients presenting a certificate signed by a throwaway CA, and only
// authenticated ACL users: the default user is off.
type TLSNodes struct {
	// Addrs are the nodes' TLS addresses, "127.0.0.1:PORT".
	Addrs []string
	// PlainAddrs are the plaintext addresses the nodes were started on
	// (redisnode's readiness probe speaks plaintext RESP); TLS closed them
	// (CONFIG SET port 0) before returning.
	PlainAddrs []string
	// Password is the password of AdminUser and of every User.
	Password string
	// CAFile, ServerCertFile and ClientCertFile are PEM certificates;
	// ServerKeyFile and ClientKeyFile their PKCS #8 keys; ACLFile the nodes'
	// aclfile.
	CAFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile, ACLFile string

	roots  *x509.CertPool
	client tls.Certificate
}

// TLS starts n >= 1 redis-server nodes that serve TLS only, with
// --tls-auth-clients yes: a fresh CA, server certificate (127.0.0.1, ::1,
// localhost) and client certificate, valid for TLSValidity, are written to a
// temporary directory. Users come from an aclfile with AdminUser, all with
// the password Password; the default user is off. Nodes close when the test
// ends and are not meant to be restarted. Each starts with a plaintext port
// for redisnode's readiness probe (the default user may only PING and INFO
// there), closed with CONFIG SET port 0 before any test traffic.
func TLS(t testing.TB, n int, users ...User) *TLSNodes {
	t.Helper()
	if n < 1 {
		t.Fatalf("redistest: TLS: %d nodes: want at least 1", n)
	}
	dir := t.TempDir()
	env, err := writePKI(dir, TLSValidity)
	if err != nil {
		t.Fatalf("redistest: TLS: %v", err)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	env.Password = hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(env.Password))
	hash := "#" + hex.EncodeToString(sum[:])
	acl := []string{
		"user default on nopass -@all +ping +info", // the readiness probe; off once ready
		"user " + AdminUser + " on " + hash + " ~* &* +@all",
	}
	for _, u := range users {
		if u.Name == "" || strings.ContainsAny(u.Name, " \n") || u.Name == AdminUser || u.Name == "default" {
			t.Fatalf("redistest: TLS: invalid user name %q", u.Name)
		}
		acl = append(acl, "user "+u.Name+" on "+hash+" "+strings.Join(strings.Fields(u.Rules), " "))
	}
	env.ACLFile = filepath.Join(dir, "users.acl")
	if err := os.WriteFile(env.ACLFile, []byte(strings.Join(acl, "\n")+"\n"), 0o600); err != nil {
		t.Fatalf("redistest: TLS: writing the aclfile: %v", err)
	}

	ctx := t.Context()
	for i := 0; i < n; i++ {
		node, tlsAddr, err := startTLSNode(ctx, env)
		if err != nil {
			t.Fatalf("redistest: TLS: starting node %d of %d: %v", i+1, n, err)
		}
		t.Cleanup(func() {
			if err := node.Close(); err != nil {
				t.Errorf("redistest: closing TLS node %s: %v", tlsAddr, err)
			}
		})
		if err := lockDown(ctx, node.Addr(), env.Password); err != nil {
			t.Fatalf("redistest: TLS: node %d of %d: %v", i+1, n, err)
		}
		env.Addrs = append(env.Addrs, tlsAddr)
		env.PlainAddrs = append(env.PlainAddrs, node.Addr())
	}
	return env
}

// ClientTLS returns a new TLS configuration that trusts the CA and presents
// the client certificate.
func (e *TLSNodes) ClientTLS() *tls.Config {
	return &tls.Config{
		RootCAs:      e.roots,
		Certificates: []tls.Certificate{e.client},
		MinVersion:   tls.VersionTLS12,
	}
}

// Client returns a client for node i over TLS (ClientTLS) as user, with
// Password, and otherwise as Client makes them: context deadlines honoured,
// ClientTimeout, no retries. It is closed when the test ends.
func (e *TLSNodes) Client(t testing.TB, i int, user string) *redis.Client {
	t.Helper()
	return e.ClientWith(t, i, user, e.ClientTLS())
}

// ClientWith is Client with the TLS configuration cfg.
func (e *TLSNodes) ClientWith(t testing.TB, i int, user string, cfg *tls.Config) *redis.Client {
	t.Helper()
	if i < 0 || i >= len(e.Addrs) {
		t.Fatalf("redistest: TLS client: node %d of %d", i, len(e.Addrs))
	}
	o := ClientOptions(e.Addrs[i])
	o.Username, o.Password, o.TLSConfig = user, e.Password, cfg
	c := redis.NewClient(o)
	closeAtEnd(t, c, "TLS client for "+e.Addrs[i])
	return c
}

// Clients returns one Client per node as user, in node order.
func (e *TLSNodes) Clients(t testing.TB, user string) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(e.Addrs))
	for i := range e.Addrs {
		out[i] = e.Client(t, i, user)
	}
	return out
}

// Admin returns a Client for node i as AdminUser.
func (e *TLSNodes) Admin(t testing.TB, i int) *redis.Client {
	t.Helper()
	return e.Client(t, i, AdminUser)
}

// startTLSNode starts one node with a free TLS port, picking another if the
// one picked was taken meanwhile.
func startTLSNode(ctx context.Context, env *TLSNodes) (*redisnode.Node, string, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = freeport.Pick(); err != nil {
			return nil, "", err
		}
		var node *redisnode.Node
		node, err = redisnode.Start(ctx, redisnode.Options{Args: []string{
			"--tls-port", strconv.Itoa(port),
			"--tls-cert-file", env.ServerCertFile,
			"--tls-key-file", env.ServerKeyFile,
			"--tls-ca-cert-file", env.CAFile,
			"--tls-auth-clients", "yes",
			"--aclfile", env.ACLFile,
		}})
		if err == nil {
			return node, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
		}
		if !isBindFailure(err) {
			return nil, "", err
		}
	}
	return nil, "", err
}

// lockDown closes a node's plaintext port and turns the default user off.
func lockDown(ctx context.Context, plainAddr, password string) error {
	c := redis.NewClient(&redis.Options{
		Addr: plainAddr, Username: AdminUser, Password: password,
		ContextTimeoutEnabled: true, DialTimeout: ClientTimeout, ReadTimeout: ClientTimeout, WriteTimeout: ClientTimeout,
		MaxRetries: -1, DialerRetries: 1, PoolSize: 1,
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// One connection throughout: closing the listener does not close it.
	conn := c.Conn()
	defer conn.Close()
	if err := conn.ConfigSet(ctx, "port", "0").Err(); err != nil {
		return fmt.Errorf("closing the plaintext port %s: %w", plainAddr, err)
	}
	if err := conn.Do(ctx, "ACL", "SETUSER", "default", "off", "resetpass", "-@all").Err(); err != nil {
		return fmt.Errorf("turning the default user off: %w", err)
	}
	return nil
}

// writePKI makes a CA, a server and a client certificate in dir.
func writePKI(dir string, validity time.Duration) (*TLSNodes, error) {
	now := time.Now()
	newKey := func() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
	serial := func() *big.Int {
		s, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		return s
	}
	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "redfence test CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) ([]byte, *ecdsa.PrivateKey, error) {
		key, err := newKey()
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Minute),
			NotAfter:     now.Add(validity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("creating the %s certificate: %w", cn, err)
		}
		return der, key, nil
	}
	serverDER, serverKey, err := leaf("redfence test server", x509.ExtKeyUsageServerAuth,
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	clientDER, clientKey, err := leaf("redfence test client", x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}

	e := &TLSNodes{
		CAFile:         filepath.Join(dir, "ca.crt"),
		ServerCertFile: filepath.Join(dir, "server.crt"),
		ServerKeyFile:  filepath.Join(dir, "server.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
	}
	for _, f := range []struct {
		path string
		der  []byte
	}{{e.CAFile, caDER}, {e.ServerCertFile, serverDER}, {e.ClientCertFile, clientDER}} {
		if err := writePEM(f.path, "CERTIFICATE", f.der); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		path string
		key  *ecdsa.PrivateKey
	}{{e.ServerKeyFile, serverKey}, {e.ClientKeyFile, clientKey}} {
		der, err := x509.MarshalPKCS8PrivateKey(f.key)
		if err != nil {
			return nil, err
		}
		if err := writePEM(f.path, "PRIVATE KEY", der); err != nil {
			return nil, err
		}
	}
	e.roots = x509.NewCertPool()
	e.roots.AddCert(ca)
	if e.client, err = tls.LoadX509KeyPair(e.ClientCertFile, e.ClientKeyFile); err != nil {
		return nil, fmt.Errorf("loading the client certificate: %w", err)
	}
	return e, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}
