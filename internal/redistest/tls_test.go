package redistest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	require.Equal(t, "CERTIFICATE", block.Type)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

// selfSigned returns a client certificate that no CA of the rig signed.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "stranger"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestTLSRig(t *testing.T) {
	t.Parallel()
	env := redistest.TLS(t, 2, redistest.User{Name: "reader", Rules: "~x:* +get"})
	require.Len(t, env.Addrs, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	t.Run("Certificates", func(t *testing.T) {
		ca := readCert(t, env.CAFile)
		server := readCert(t, env.ServerCertFile)
		client := readCert(t, env.ClientCertFile)
		assert.True(t, ca.IsCA)
		for _, c := range []*x509.Certificate{ca, server, client} {
			pub, ok := c.PublicKey.(*ecdsa.PublicKey)
			require.True(t, ok, "ECDSA")
			assert.Equal(t, elliptic.P256(), pub.Curve)
			assert.LessOrEqual(t, c.NotAfter.Sub(c.NotBefore), redistest.TLSValidity+time.Minute, "short validity")
			assert.True(t, c.NotAfter.Before(time.Now().Add(2*time.Hour)))
		}
		assert.Contains(t, server.DNSNames, "localhost")
		require.NotEmpty(t, server.IPAddresses)
		assert.True(t, server.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)))
		assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, server.ExtKeyUsage)
		assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, client.ExtKeyUsage)
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		_, err := server.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"})
		assert.NoError(t, err)
		_, err = client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		assert.NoError(t, err)
		for _, f := range []string{env.ServerKeyFile, env.ClientKeyFile, env.ACLFile} {
			fi, err := os.Stat(f)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
		}
	})

	t.Run("AdminOverTLS", func(t *testing.T) {
		for i := range env.Addrs {
			require.NoError(t, env.Admin(t, i).Set(ctx, "x:1", i, time.Minute).Err())
		}
		for i := range env.Addrs {
			got, err := env.Admin(t, i).Get(ctx, "x:1").Int()
			require.NoError(t, err)
			assert.Equal(t, i, got, "each address is its own node")
		}
	})

	// The node's own word, not a dial: once freed, the old plaintext port
	// may be taken by another test's server.
	t.Run("PlaintextPortClosed", func(t *testing.T) {
		for i, addr := range env.PlainAddrs {
			got, err := env.Admin(t, i).ConfigGet(ctx, "port").Result()
			require.NoError(t, err)
			assert.Equal(t, "0", got["port"], "node %d no longer listens in plaintext (it did on %s)", i, addr)
		}
	})

	t.Run("PlaintextOnTLSPortRefused", func(t *testing.T) {
		err := redistest.Client(t, env.Addrs[0]).Ping(ctx).Err()
		assert.Error(t, err)
	})

	t.Run("ClientCertificateRequired", func(t *testing.T) {
		noCert := env.ClientTLS()
		noCert.Certificates = nil
		err := env.ClientWith(t, 0, redistest.AdminUser, noCert).Ping(ctx).Err()
		require.Error(t, err)
		assertCertRefused(t, err)

		stranger := env.ClientTLS()
		stranger.Certificates = []tls.Certificate{selfSigned(t)}
		err = env.ClientWith(t, 0, redistest.AdminUser, stranger).Ping(ctx).Err()
		require.Error(t, err)
		assertCertRefused(t, err)
	})

	t.Run("ServerVerified", func(t *testing.T) {
		untrusting := env.ClientTLS()
		untrusting.RootCAs = x509.NewCertPool()
		err := env.ClientWith(t, 0, redistest.AdminUser, untrusting).Ping(ctx).Err()
		require.Error(t, err)
		var unknown x509.UnknownAuthorityError
		assert.ErrorAs(t, err, &unknown)
	})

	t.Run("DefaultUserOff", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: env.Addrs[0], TLSConfig: env.ClientTLS(), MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		err := c.Ping(ctx).Err()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "NOAUTH")
		err = env.ClientWith(t, 0, "default", env.ClientTLS()).Ping(ctx).Err()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WRONGPASS")
	})

	t.Run("UsersFromTheACLFile", func(t *testing.T) {
		reader := env.Client(t, 0, "reader")
		got, err := reader.Get(ctx, "x:1").Int()
		require.NoError(t, err)
		assert.Equal(t, 0, got)
		err = reader.Set(ctx, "x:1", 1, 0).Err()
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(err.Error(), "NOPERM"), "%v", err)
		err = reader.Get(ctx, "y:1").Err()
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(err.Error(), "NOPERM"), "%v", err)
	})
}

// The minimal rules the tests verify are the ones docs/topologies.md
// publishes (the lock rule in both forms; the semaphore's and the read-write
// lock's as the ACL SETUSER lines that the TLS/ACL tests create users with),
// and SECURITY.md points there.
func TestACLRuleIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/topologies.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "ACL SETUSER redfence reset on >PASSWORD "+redistest.LockACL)
	assert.Contains(t, string(doc), "user redfence on #SHA256HEX "+redistest.LockACL)
	assert.Contains(t, string(doc), "ACL SETUSER redfence-check reset on >PASSWORD "+redistest.CheckACL)
	assert.Contains(t, string(doc), "ACL SETUSER redfence-wake reset on >PASSWORD "+redistest.LockACL+" "+redistest.WakeupACL)
	assert.Contains(t, string(doc), "ACL SETUSER redfence-sem reset on >PASSWORD "+redistest.LockACL+" "+redistest.SemaphoreACL)
	assert.Contains(t, string(doc), "ACL SETUSER redfence-rw reset on >PASSWORD "+redistest.LockACL+" "+redistest.RWMutexACL)
	sec, err := os.ReadFile("../../SECURITY.md")
	require.NoError(t, err)
	assert.Contains(t, string(sec), "docs/topologies.md")
	assert.Contains(t, string(sec), redistest.LockACL)
	assert.Contains(t, strings.Join(strings.Fields(string(sec)), " "), redistest.WakeupACL)
}

// assertCertRefused checks that a connection failed because the server
// refused the client's certificate. In TLS 1.3 the client's handshake ends
// before the server checks its certificate, so the client may see the
// server's alert ("certificate required", "unknown certificate authority")
// or, when its first write races the server closing the connection, only the
// reset or the closed connection that the refusal caused.
func assertCertRefused(t *testing.T, err error) {
	t.Helper()
	if strings.Contains(err.Error(), "certificate") {
		return
	}
	msg := err.Error()
	assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) ||
		strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "broken pipe"),
		"want a certificate refusal, or the reset it causes: %v", err)
}
