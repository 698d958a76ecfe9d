// Package testcerts writes throwaway TLS certificates for tests: a fresh
// ECDSA certificate authority, a server certificate for 127.0.0.1 and
// localhost, and a client certificate, all signed by that authority and
// valid for a day.
//
// Every call to [Generate] makes a new, unrelated authority, so a second
// call gives the certificates of a "wrong CA" case. The CA's private key is
// not kept: nothing else can be signed by it. The files are for tests on
// the loopback interface only; nothing here is fit to protect real traffic.
package testcerts
