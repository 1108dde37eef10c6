package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
)

func TestParseAddrs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"127.0.0.1:6379", []string{"127.0.0.1:6379"}, ""},
		{" a:1 , b:2,[::1]:3 ", []string{"a:1", "b:2", "[::1]:3"}, ""},
		{"a:1,", nil, "entry 2 is empty"},
		{"a", nil, `"a" is not host:port`},
		{":1", nil, `":1" has no host`},
		{"a:0", nil, `port "0" is not a number in 1-65535`},
		{"a:65536", nil, "not a number in 1-65535"},
		{"a:http", nil, "not a number"},
		{"a:1,b:2,A:1", nil, `"A:1" is given twice (entries 1 and 3)`},
	}
	for _, tt := range tests {
		got, err := parseAddrs(tt.in)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, "%q", tt.in)
			continue
		}
		require.NoError(t, err, "%q", tt.in)
		assert.Equal(t, tt.want, got)
	}
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, as PEM files in a temporary directory.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		require.NoError(t, err)
		return b
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redfence test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	issue := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "redfence test " + strconv.FormatInt(serial, 10)},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		require.NoError(t, err)
		return der, k
	}
	srvDER, srvKey := issue(2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	cliDER, cliKey := issue(3, x509.ExtKeyUsageClientAuth, nil)
	return testPKI{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", srvDER),
		serverKey:  write("server-key.pem", "PRIVATE KEY", keyDER(srvKey)),
		clientCert: write("client.pem", "CERTIFICATE", cliDER),
		clientKey:  write("client-key.pem", "PRIVATE KEY", keyDER(cliKey)),
	}
}

func TestTLSFlags(t *testing.T) {
	pki := newTestPKI(t)
	notPEM := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))

	c, err := (&connFlags{}).tlsConfig()
	require.NoError(t, err)
	assert.Nil(t, c, "no TLS flag: plain TCP")

	c, err = (&connFlags{tlsServerName: "redis.internal"}).tlsConfig()
	require.NoError(t, err)
	require.NotNil(t, c, "any TLS flag implies -tls")
	assert.Equal(t, "redis.internal", c.ServerName)
	assert.Nil(t, c.RootCAs, "the system's CAs")

	c, err = (&connFlags{tlsCA: pki.ca, tlsCert: pki.clientCert, tlsKey: pki.clientKey, tlsInsecure: true}).tlsConfig()
	require.NoError(t, err)
	assert.NotNil(t, c.RootCAs)
	assert.Len(t, c.Certificates, 1)
	assert.True(t, c.InsecureSkipVerify)

	for _, tt := range []struct {
		f    connFlags
		want string
	}{
		{connFlags{tlsCA: filepath.Join(t.TempDir(), "missing.pem")}, "-tls-ca: open "},
		{connFlags{tlsCA: notPEM}, "-tls-ca: no PEM certificate found in " + notPEM},
		{connFlags{tlsCert: pki.clientCert}, "-tls-cert needs -tls-key"},
		{connFlags{tlsKey: pki.clientKey}, "-tls-key needs -tls-cert"},
		{connFlags{tlsCert: pki.clientCert, tlsKey: pki.serverKey}, "-tls-cert/-tls-key: "},
	} {
		_, err := tt.f.tlsConfig()
		assert.ErrorContains(t, err, tt.want)
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

func TestTLSEndToEnd(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	port := freePort(t)
	redistest.Nodes(t, 1, func(o *redisnode.Options) {
		o.Args = append(o.Args, "--tls-port", strconv.Itoa(port), "--tls-cert-file", pki.serverCert,
			"--tls-key-file", pki.serverKey, "--tls-ca-cert-file", pki.ca, "--tls-auth-clients", "yes")
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	status := []string{"status", "-nodes", addr, "-key", "k"}
	withCert := []string{"-tls-cert", pki.clientCert, "-tls-key", pki.clientKey}

	r := runCLI(t, cliEnv(), append(append(status, "-tls-ca", pki.ca), withCert...)...)
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "new or flushed")

	r = runCLI(t, cliEnv(), append(append(status, "-tls", "-tls-insecure-skip-verify"), withCert...)...)
	assert.Equal(t, exitOK, r.code)

	r = runCLI(t, cliEnv(), append(append(status, "-tls"), withCert...)...)
	assert.Equal(t, exitUnavailable, r.code, "the test CA is not a system CA")
	assert.Contains(t, r.stdout, "certificate")

	r = runCLI(t, cliEnv(), append(status, "-tls-ca", pki.ca)...)
	assert.Equal(t, exitUnavailable, r.code, "the node requires a client certificate")

	r = runCLI(t, cliEnv(), append(append([]string{"exec", "-single", "-fencing", "-nodes", addr, "-key", "k", "-tls-ca", pki.ca}, withCert...),
		"--", "sh", "-c", `test "$REDFENCE_TOKEN" -gt 1000000000000000`)...)
	assert.Equal(t, exitOK, r.code, "exec over TLS")
}

func TestParseExecFlags(t *testing.T) {
	env := func(k string) string {
		return map[string]string{envNodes: "e:1,e:2,e:3", envPassword: "pw", envUsername: "u"}[k]
	}
	noEnv := func(string) string { return "" }
	var stderr strings.Builder

	c, err := parseExecFlags([]string{"-key", "k", "--", "cmd", "-x", "--", "y"}, env, &stderr)
	require.NoError(t, err)
	assert.Equal(t, execConfig{
		conn:  connConfig{addrs: []string{"e:1", "e:2", "e:3"}, username: "u", password: "pw"},
		key:   "k",
		ttl:   10 * time.Second,
		grace: 2 * time.Second, // ttl/5

		argv: []string{"cmd", "-x", "--", "y"},
	}, c)
	assert.Empty(t, stderr.String())

	c, err = parseExecFlags([]string{"--nodes", "f:1", "--key", "k", "--ttl", "2s", "--wait", "1s", "--fencing", "--prefix", "p:",
		"--quarantine", "0", "--single", "--grace", "0", "--vouch", "cmd"}, env, &stderr)
	require.NoError(t, err)
	assert.Equal(t, []string{"f:1"}, c.conn.addrs, "-nodes wins over the environment")
	assert.Equal(t, lockSettings{ttl: 2 * time.Second, fencing: true, prefix: "p:", quarantineSet: true}, c.settings())
	assert.Equal(t, time.Second, c.wait)
	assert.Zero(t, c.grace)
	assert.True(t, c.single)
	assert.True(t, c.vouch)
	assert.Equal(t, []string{"cmd"}, c.argv, "a command without --")

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "cmd"}, "-key is required"},
		{[]string{"-key", "k"}, "no command given"},
		{[]string{"-key", "k", "-ttl", "0", "cmd"}, "-ttl must be positive"},
		{[]string{"-key", "k", "-wait", "-1s", "cmd"}, "-wait must not be negative"},
		{[]string{"-key", "k", "-grace", "-1s", "cmd"}, "-grace must not be negative"},
		{[]string{"-key", "k", "-grace", "10s", "cmd"}, "-grace (10s) must be shorter than -ttl (10s)"},
		{[]string{"-key", "k", "-ttl", "2s", "-grace", "2s", "cmd"}, "-grace (2s) must be shorter than -ttl (2s)"},
		{[]string{"-key", "k", "-quarantine", "-1s", "cmd"}, "-quarantine must not be negative"},
		{[]string{"-key", "k", "-single", "cmd"}, "-single uses exactly one node, but 3 are given"},
		{[]string{"-key", "k", "-nodes", "x:1,x:1", "cmd"}, `-nodes: "x:1" is given twice`},
		{[]string{"-key", "k", "-tls-cert", "c.pem", "cmd"}, "-tls-cert needs -tls-key"},
		{[]string{"-key", "k", "-ttl", "soon", "cmd"}, `invalid value "soon" for flag -ttl`},
		{[]string{"-password", "pw", "-key", "k", "cmd"}, "there is no -password flag"},
	} {
		stderr.Reset()
		_, err := parseExecFlags(tt.args, env, &stderr)
		assert.Error(t, err, "%q", tt.args)
		assert.Contains(t, stderr.String(), tt.want, "%q", tt.args)
	}

	// The default -grace is ttl/5, at most 5s; an explicit one is kept.
	for _, tt := range []struct {
		args  []string
		grace time.Duration
	}{
		{[]string{"-ttl", "2s"}, 400 * time.Millisecond},
		{[]string{"-ttl", "1m"}, 5 * time.Second},
		{[]string{"-ttl", "2s", "-grace", "1500ms"}, 1500 * time.Millisecond},
	} {
		c, err := parseExecFlags(append(append([]string{"-key", "k"}, tt.args...), "cmd"), env, &stderr)
		require.NoError(t, err, "%q", tt.args)
		assert.Equal(t, tt.grace, c.grace, "%q", tt.args)
	}

	stderr.Reset()
	_, err = parseExecFlags([]string{"-key", "k", "cmd"}, noEnv, &stderr)
	assert.Error(t, err)
	assert.Contains(t, stderr.String(), "no nodes given: use -nodes host:port,... or set $REDFENCE_NODES")
}
