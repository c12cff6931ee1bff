/* SPDX-License-Identifier: Apache-2.0 */
/* auth.c - the job secret and the MACs that prove it (auth.h), on libsodium. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bootstrap/auth.h"

_Static_assert(RING__KEY_BYTES == crypto_auth_KEYBYTES, "the key is crypto_auth's");
_Static_assert(RING__MAC_BYTES == crypto_auth_BYTES, "the MAC is crypto_auth's");

/*
 * The key RING_JOB_SECRET gave this process, kept after the variable is scrubbed so that a
 * second ring_init (after ring_finalize) finds it. ring_init is not thread-safe itself, so
 * neither is this.
 */
static struct ring__key env_key;
static int env_key_set;

static int start_sodium(void)
{
    /* 0 the first time, 1 after: both fine; it is cheap once started. */
    return sodium_init() < 0 ? -1 : 0;
}

int ring__key_generate(struct ring__key *k)
{
    if (start_sodium() < 0)
        return ring__err(RING_ESYS, "libsodium could not start (no source of randomness?)");
    randombytes_buf(k->bytes, sizeof(k->bytes));
    return 0;
}

void ring__hex_encode(const unsigned char *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int ring__hex_decode(const char *s, unsigned char *out, size_t n)
{
    if (strlen(s) != 2 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

void ring__key_hex(const struct ring__key *k, char hex[RING__KEY_HEX + 1])
{
    ring__hex_encode(k->bytes, sizeof(k->bytes), hex);
}

int ring__key_parse(const char *hex, struct ring__key *k)
{
    struct ring__key tmp;
    if (hex == NULL || ring__hex_decode(hex, tmp.bytes, sizeof(tmp.bytes)) < 0)
        return -1;
    *k = tmp;
    ring__key_wipe(&tmp);
    return 0;
}

void ring__key_wipe(struct ring__key *k)
{
    sodium_memzero(k->bytes, sizeof(k->bytes));
}

int ring__key_from_env(struct ring__key *k)
{
    char *v = getenv(RING__SECRET_ENV);
    int bad;

    if (v == NULL) {
        if (!env_key_set)
            return 0;
        *k = env_key;
        return 1;
    }
    bad = ring__key_parse(v, k) < 0;
    /* The environment's own copy of the string: its bytes are what /proc/PID/environ shows
     * (for a variable the process was started with) and what a child would inherit. */
    sodium_memzero(v, strlen(v));
    unsetenv(RING__SECRET_ENV);
    if (bad) {
        ring__log(RING_LOG_ERROR, "%s is not %d hex digits (start the program with ringrun)",
                  RING__SECRET_ENV, RING__KEY_HEX);
        return ring__err(RING_EENV, "%s is not %d hex digits (start the program with ringrun)",
                         RING__SECRET_ENV, RING__KEY_HEX);
    }
    env_key = *k;
    env_key_set = 1;
    return 1;
}

void ring__auth_nonce(unsigned char n[RING__NONCE_BYTES])
{
    /* Only fails where ring__key_generate already did: every process that authenticates
     * got its key through a bootstrap that started libsodium, or from its environment;
     * randombytes_buf falls back to the kernel's getrandom on its own. */
    (void)start_sodium();
    randombytes_buf(n, RING__NONCE_BYTES);
}

/* The bytes a MAC covers: the role, then the transcript. */
struct signed_bytes {
    uint32_t role;
    uint32_t pad;
    struct ring__auth_transcript t;
};

void ring__auth_mac(const struct ring__key *k, enum ring__auth_role role,
                    const struct ring__auth_transcript *t, unsigned char mac[RING__MAC_BYTES])
{
    struct signed_bytes s;
    memset(&s, 0, sizeof(s));
    s.role = (uint32_t)role;
    s.t = *t;
    crypto_auth(mac, (const unsigned char *)&s, sizeof(s), k->bytes);
}

int ring__auth_check(const struct ring__key *k, enum ring__auth_role role,
                     const struct ring__auth_transcript *t,
                     const unsigned char mac[RING__MAC_BYTES])
{
    struct signed_bytes s;
    memset(&s, 0, sizeof(s));
    s.role = (uint32_t)role;
    s.t = *t;
    return crypto_auth_verify(mac, (const unsigned char *)&s, sizeof(s), k->bytes) == 0;
}
