/* SPDX-License-Identifier: Apache-2.0 */
/* tls.c - the certificate and key that every new TLS handshake gets (tls.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/x509.h>
#include <sodium.h>

#include "tls.h"

/*
 * The most certificates a chain file may hold: a leaf and its intermediates. Public CAs
 * chain through one or two intermediates, and an enterprise CA rarely through more than
 * three; 16 is far beyond any chain a client would follow.
 */
#define TLS_CHAIN_MAX 16

struct tls_pair {
    gnutls_pcert_st pcert[TLS_CHAIN_MAX];
    unsigned npcert;
    gnutls_privkey_t key;
    struct tls_pair *older; /* replaced pairs, kept for handshakes that may use them */
};

static _Atomic(struct tls_pair *) tls_current;

/* The whole file at path in *out (gnutls_free it), or -1 with err. */
static int read_file(const char *path, const char *what, gnutls_datum_t *out, struct error *err)
{
    int rc = gnutls_load_file(path, out);
    if (rc < 0) {
        errno = rc == GNUTLS_E_MEMORY_ERROR ? ENOMEM : EINVAL;
        return errprintf(err, "cannot read the TLS %s %s: %s", what, path,
                         rc == GNUTLS_E_FILE_ERROR ? strerror(ENOENT) : gnutls_strerror(rc));
    }
    if (out->size == 0) {
        gnutls_free(out->data);
        errno = EINVAL;
        return errprintf(err, "the TLS %s %s is empty", what, path);
    }
    return 0;
}

static void pair_free(struct tls_pair *p)
{
    if (p == NULL)
        return;
    for (unsigned i = 0; i < p->npcert; i++)
        gnutls_pcert_deinit(&p->pcert[i]);
    gnutls_privkey_deinit(p->key);
    free(p);
}

/* The leaf's fingerprint, subject and validity into info; -1 with err when it is not valid
 * now (a client would refuse it). */
static int check_leaf(const gnutls_datum_t *der, const char *path, struct tls_info *info,
                      struct error *err)
{
    gnutls_x509_crt_t crt;
    unsigned char md[32];
    size_t mdlen = sizeof(md), dnlen = sizeof(info->subject);
    time_t now = time(NULL), from, until;
    int rc = -1;

    if (gnutls_x509_crt_init(&crt) < 0)
        return errno = ENOMEM, errprintf(err, "out of memory");
    if (gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER) < 0) {
        errno = EINVAL;
        errprintf(err, "cannot parse the first certificate of %s", path);
        goto error;
    }
    from = gnutls_x509_crt_get_activation_time(crt);
    until = gnutls_x509_crt_get_expiration_time(crt);
    if (from != (time_t)-1 && now < from) {
        errno = EINVAL;
        errprintf(err, "the TLS certificate %s is not valid before %.24s (check the clock)", path,
                  ctime(&from));
        goto error;
    }
    if (until != (time_t)-1 && now > until) {
        errno = EINVAL;
        errprintf(err, "the TLS certificate %s expired at %.24s; renew it", path, ctime(&until));
        goto error;
    }
    info->not_after = (long long)until;
    if (gnutls_x509_crt_get_dn(crt, info->subject, &dnlen) < 0)
        snprintf(info->subject, sizeof(info->subject), "?");
    if (gnutls_x509_crt_get_fingerprint(crt, GNUTLS_DIG_SHA256, md, &mdlen) < 0)
        mdlen = 0;
    info->fingerprint[0] = '\0';
    for (size_t i = 0; i < mdlen; i++) /* "AB:" each, the last ':' ended */
        snprintf(info->fingerprint + 3 * i, sizeof(info->fingerprint) - 3 * i, "%02X%s", md[i],
                 i + 1 < mdlen ? ":" : "");
    rc = 0;
error:
    gnutls_x509_crt_deinit(crt);
    return rc;
}

/* Whether key is cert's: GnuTLS compares them when it makes credentials of the two. */
static int check_match(const gnutls_datum_t *cert, const gnutls_datum_t *key, const char *cert_path,
                       const char *key_path, struct error *err)
{
    gnutls_certificate_credentials_t cred;
    int rc;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return errno = ENOMEM, errprintf(err, "out of memory");
    rc = gnutls_certificate_set_x509_key_mem2(cred, cert, key, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (rc >= 0)
        return 0;
    errno = EINVAL;
    if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
        return errprintf(err, "the TLS key %s is not the key of the certificate %s", key_path,
                         cert_path);
    return errprintf(err, "%s and %s are not a PEM certificate and its unencrypted PEM key (%s)",
                     cert_path, key_path, gnutls_strerror(rc));
}

int tls_load(const char *cert_path, const char *key_path, struct tls_info *info, struct error *err)
{
    gnutls_datum_t cert = {NULL, 0}, key = {NULL, 0};
    struct tls_info local;
    struct tls_pair *p = calloc(1, sizeof(*p));
    int rc;

    if (info == NULL)
        info = &local;
    if (p == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    if (read_file(cert_path, "certificate", &cert, err) < 0 ||
        read_file(key_path, "key", &key, err) < 0)
        goto error;
    p->npcert = TLS_CHAIN_MAX;
    rc = gnutls_pcert_list_import_x509_raw(p->pcert, &p->npcert, &cert, GNUTLS_X509_FMT_PEM,
                                           GNUTLS_X509_CRT_LIST_FAIL_IF_UNSORTED);
    if (rc < 0) {
        p->npcert = 0;
        errno = EINVAL;
        errprintf(err, "%s is not a PEM certificate chain of at most %d, the server's first (%s)",
                  cert_path, TLS_CHAIN_MAX, gnutls_strerror(rc));
        goto error;
    }
    if (check_leaf(&p->pcert[0].cert, cert_path, info, err) < 0)
        goto error;
    if (gnutls_privkey_init(&p->key) < 0 ||
        gnutls_privkey_import_x509_raw(p->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0) < 0) {
        errno = EINVAL;
        errprintf(err, "cannot read the TLS key %s: an unencrypted PEM key is needed", key_path);
        goto error;
    }
    /* Last: GnuTLS 3.7 leaks on this call's error path for a file that is not PEM, which
     * the two imports above have ruled out by now. */
    if (check_match(&cert, &key, cert_path, key_path, err) < 0)
        goto error;
    info->chain = p->npcert;
    sodium_memzero(key.data, key.size);
    gnutls_free(key.data);
    gnutls_free(cert.data);
    p->older = atomic_load(&tls_current);
    atomic_store(&tls_current, p);
    return 0;
error:
    if (key.data != NULL)
        sodium_memzero(key.data, key.size);
    gnutls_free(key.data);
    gnutls_free(cert.data);
    pair_free(p);
    return -1;
}

void tls_unload(void)
{
    struct tls_pair *p = atomic_exchange(&tls_current, NULL);
    while (p != NULL) {
        struct tls_pair *older = p->older;
        pair_free(p);
        p = older;
    }
}

int tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                 const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                 gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *key)
{
    struct tls_pair *p = atomic_load(&tls_current);
    (void)session, (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
    if (p == NULL)
        return -1;
    *pcert = p->pcert;
    *pcert_length = p->npcert;
    *key = p->key;
    return 0;
}
