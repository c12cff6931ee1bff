/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.h - bearer tokens. A token reads "ringd_<id>_<secret>": the id finds the row, and
 * the SHA-256 of the secret (libsodium) is compared with the stored hash in constant time.
 * The secret has 256 bits of entropy, so a fast hash is the right one; it is never stored.
 */
#ifndef RINGD_AUTH_H
#define RINGD_AUTH_H

#include <stddef.h>

#include "store.h"

#define AUTH_TOKEN_LEN 128

/* Initializes libsodium. Returns 0 or -1. */
int auth_init(void);
/*
 * Creates a token named name and stores its hash; writes the full token (shown once) into
 * token (AUTH_TOKEN_LEN bytes). Returns 0 or -1 with err.
 */
int auth_token_create(struct store *st, const char *name, int admin, char *token,
                      struct error *err);
/*
 * Checks an Authorization header value ("Bearer ringd_..."). Returns 0 and fills owner
 * (the token's name) and *admin, or -1 (err says why, without echoing the secret).
 */
/*
 * Servers may remember tokens they checked for a while; auth_generation() changes whenever
 * a token is revoked (auth_revoked()), so that whatever was remembered before is checked
 * again.
 */
void auth_revoked(void);
unsigned auth_generation(void);
int auth_check(struct store *st, const char *header, char *owner, size_t ownerlen, int *admin,
               struct error *err);

#endif /* RINGD_AUTH_H */
