/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.h - ringd's TLS certificate and key, which SIGHUP replaces on the live server.
 *
 * libmicrohttpd reads a certificate given as MHD_OPTION_HTTPS_MEM_CERT once, at start, and
 * has no call to change it. So ringd gives it none: it passes tls_retrieve as
 * MHD_OPTION_HTTPS_CERT_CALLBACK instead, and GnuTLS asks for the certificate at every
 * handshake. tls_load makes a new pair the one that handshakes from then on get; the
 * connections already open keep the one they were made with, and no connection is closed.
 *
 * A pair is checked before it is used (PEM, the key is the certificate's, the certificate
 * is valid now): a bad one is refused and the current one stays.
 *
 * One per process: GnuTLS's callback gets no argument of the caller's, so the pair in use
 * is a global. A pair that was replaced is kept until tls_unload, since a handshake may be
 * using it; a reload adds a few KiB, and certificates are rotated every few weeks.
 *
 * Threads: tls_retrieve from any (libmicrohttpd's); tls_load and tls_unload from one.
 */
#ifndef RINGD_TLS_H
#define RINGD_TLS_H

#include <stddef.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "common/error.h"

/* What tls_load says of the pair it installed. */
struct tls_info {
    char fingerprint[3 * 32]; /* SHA-256 of the leaf certificate, "AB:CD:..." as openssl */
    char subject[256];        /* its distinguished name */
    long long not_after;      /* when it expires, seconds since the epoch */
    unsigned chain;           /* certificates in the file (leaf first) */
};

/*
 * Reads the PEM certificate chain at cert_path and the PEM key at key_path, checks them,
 * and makes them the pair that every new handshake gets. Returns 0 with *info filled (info
 * may be NULL), or -1 with errno (EINVAL: a bad file, ENOMEM) and err saying what to fix;
 * the pair in use, if any, stays.
 */
int tls_load(const char *cert_path, const char *key_path, struct tls_info *info, struct error *err);
/* Frees every pair tls_load installed. Only after the server that used them stopped. */
void tls_unload(void);

/* MHD_OPTION_HTTPS_CERT_CALLBACK's function (gnutls_certificate_retrieve_function2): the
 * current pair, owned by this module. Returns 0, or -1 before any tls_load. */
int tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                 const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                 gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *key);

#endif /* RINGD_TLS_H */
