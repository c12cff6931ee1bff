/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.h - bearer tokens. A token reads "ringd_<id>_<secret>": the id finds the row, and
 * the SHA-256 of the secret (libsodium) is compared with the stored hash in constant time.
 * The secret has 256 bits of entropy, so a fast hash is the right one; it is never stored.
 */
#ifndef RINGD_AUTH_H
#define RINGD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "db/store.h"

#define AUTH_TOKEN_LEN 128

/* Initializes libsodium. Returns 0 or -1. */
int auth_init(void);
/*
 * Creates a token named name and stores its hash; writes the full token (shown once) into
 * token (AUTH_TOKEN_LEN bytes). unix_user (NULL: none) is the account its jobs run as;
 * expires (Unix seconds, 0: never) when it stops working. The token speaks for a principal
 * as store_token_create finds or makes it (EEXIST: the name is another user's), whose id
 * goes to *principal when not NULL. Returns 0 or -1 with err.
 */
int auth_token_create(struct store *st, const char *name, int admin, const char *unix_user,
                      int64_t expires, char *token, int64_t *principal, struct error *err);

/*
 * auth_token_create in two steps, for a token that must be kept somewhere before it may
 * exist (the first admin token is written to its file before its row is committed, so that
 * a failed write never leaves a token that nobody can read).
 */
struct auth_new_token {
    char token[AUTH_TOKEN_LEN]; /* "ringd_<id>_<secret>": the only copy of the secret */
    char id[13];
    char hash[65]; /* hex SHA-256 of the secret: what is stored */
};
/* A new random token into t (libsodium's generator, which does not fail once initialized). */
void auth_token_generate(struct auth_new_token *t);
/* Stores t as auth_token_create would. Returns 0 or -1 with err. */
int auth_token_store(struct store *st, const struct auth_new_token *t, const char *name, int admin,
                     const char *unix_user, int64_t expires, int64_t *principal, struct error *err);

/*
 * How long a server may go on trusting a token it checked without checking it again. A
 * revocation through the server itself is seen at once (auth_generation); one made by
 * other means (another process on the same database) takes effect within this. 10 s keeps
 * a client's every request from costing a query and a hash, and a revoked token's life
 * short.
 */
#define AUTH_CACHE_MS 10000

/* Who a checked token speaks for. */
struct auth_identity {
    char token[16];    /* the token's id, its public part ("ringd_<id>_<secret>") */
    int64_t principal; /* the jobs it submits are this principal's (store.h) */
    char owner[128];   /* the principal's name, as the API and the logs show it */
    char user[64];     /* its Unix user; "" when it has none (ringd's default user applies) */
    int admin;
    int64_t expires; /* when the token stops working (Unix seconds); 0: never */
};

/*
 * Servers may remember tokens they checked for a while; auth_generation() changes whenever
 * a token is revoked (auth_revoked()), so that whatever was remembered before is checked
 * again.
 */
void auth_revoked(void);
unsigned auth_generation(void);
/*
 * Checks an Authorization header value ("Bearer ringd_..."). Returns 0 and fills *who, or -1
 * with errno EACCES/ENOENT (err says why, without echoing the secret), EKEYEXPIRED when the
 * token is right but past its expiry (err says when it expired), or another errno when the
 * store failed.
 */
int auth_check(struct store *st, const char *header, struct auth_identity *who, struct error *err);

#endif /* RINGD_AUTH_H */
