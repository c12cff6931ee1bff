/* SPDX-License-Identifier: Apache-2.0 */
/* auth.c - bearer tokens hashed with libsodium's SHA-256, compared in constant time. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "auth.h"

int auth_init(void)
{
    return sodium_init() < 0 ? -1 : 0;
}

static void hash_hex(const char *secret, char out[65])
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)secret, strlen(secret));
    sodium_bin2hex(out, 65, h, sizeof(h));
}

void auth_token_generate(struct auth_new_token *t)
{
    unsigned char idb[6], sb[32];
    char secret[65];

    randombytes_buf(idb, sizeof(idb));
    randombytes_buf(sb, sizeof(sb));
    sodium_bin2hex(t->id, sizeof(t->id), idb, sizeof(idb));
    sodium_bin2hex(secret, sizeof(secret), sb, sizeof(sb));
    hash_hex(secret, t->hash);
    snprintf(t->token, sizeof(t->token), "ringd_%s_%s", t->id, secret);
    sodium_memzero(secret, sizeof(secret));
    sodium_memzero(sb, sizeof(sb));
}

int auth_token_store(struct store *st, const struct auth_new_token *t, const char *name, int admin,
                     const char *unix_user, int64_t expires, int64_t *principal, struct error *err)
{
    return store_token_create(st, t->id, name, t->hash, admin, unix_user, expires, principal, err);
}

int auth_token_create(struct store *st, const char *name, int admin, const char *unix_user,
                      int64_t expires, char *token, int64_t *principal, struct error *err)
{
    struct auth_new_token t;
    int rc;

    auth_token_generate(&t);
    rc = auth_token_store(st, &t, name, admin, unix_user, expires, principal, err);
    if (rc == 0)
        snprintf(token, AUTH_TOKEN_LEN, "%s", t.token);
    sodium_memzero(&t, sizeof(t));
    return rc;
}

static atomic_uint generation;

void auth_revoked(void)
{
    atomic_fetch_add(&generation, 1);
}

unsigned auth_generation(void)
{
    return atomic_load(&generation);
}

int auth_check(struct store *st, const char *header, struct auth_identity *who, struct error *err)
{
    struct store_token tok;
    char id[13], secret[65], got[65];
    const char *t;

    if (header == NULL)
        return errno = EACCES, errprintf(err, "an Authorization: Bearer <token> header is "
                                              "required");
    if (strncasecmp(header, "Bearer ", 7) != 0)
        return errno = EACCES, errprintf(err, "the Authorization header must be 'Bearer "
                                              "<token>'");
    t = header + 7;
    if (strlen(t) != 6 + 12 + 1 + 64 || strncmp(t, "ringd_", 6) != 0 || t[18] != '_')
        return errno = EACCES, errprintf(err, "the bearer token is not a ringd token");
    memcpy(id, t + 6, 12);
    id[12] = '\0';
    memcpy(secret, t + 19, 64);
    secret[64] = '\0';
    if (store_token_find(st, id, &tok, err) < 0) {
        sodium_memzero(secret, sizeof(secret));
        if (errno == ENOENT)
            errprintf(err, "the bearer token is unknown or revoked");
        return -1;
    }
    hash_hex(secret, got);
    sodium_memzero(secret, sizeof(secret));
    if (sodium_memcmp(got, tok.hash, 64) != 0)
        return errno = EACCES, errprintf(err, "the bearer token is unknown or revoked");
    /* Only a caller who holds the secret learns that the token exists and expired. */
    if (tok.expires > 0 && (int64_t)time(NULL) >= tok.expires) {
        char when[32];
        time_t at = (time_t)tok.expires;
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&at, &tm));
        return errno = EKEYEXPIRED,
               errprintf(err, "the bearer token %s expired at %s; ask an admin for a new one", id,
                         when);
    }
    who->principal = tok.principal;
    snprintf(who->token, sizeof(who->token), "%s", id);
    snprintf(who->owner, sizeof(who->owner), "%s", tok.name);
    snprintf(who->user, sizeof(who->user), "%s", tok.user);
    who->admin = tok.admin;
    who->expires = tok.expires;
    return 0;
}
