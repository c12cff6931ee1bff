/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.h - the job secret, and the proof of it that every connection between the
 * processes of a job starts with.
 *
 * A job has one secret: RING__KEY_BYTES random bytes. Who makes it depends on the
 * bootstrap (bootstrap.h): ringrun, for its rendezvous, passes it to every rank as
 * RING_JOB_SECRET (64 hex digits) in the environment of a local rank or on the standard
 * input of the remote shell, never on a command line; under PMIx rank 0 makes it and shares
 * it through the PMIx server; under MPI rank 0 broadcasts it.
 *
 * A connection is set up by two sides, one that calls (the dialer) and one that answers
 * (the acceptor). Before anything else crosses it, each proves to the other that it holds
 * the key: both send a fresh random nonce, and each answers with a MAC of the transcript
 * (which wire, who calls whom in which world, both nonces) prefixed with its own role.
 * HMAC-SHA-512-256 (libsodium's crypto_auth) makes the MAC, crypto_auth_verify checks it in
 * constant time. An answer is good for one connection and one direction only: replayed into
 * another connection it fails (the other side's nonce is new), reflected back to its sender
 * it fails (the role differs). Nobody without the key can complete the exchange, whatever
 * it sends.
 *
 * The key authenticates set-up only. The bytes that follow are neither encrypted nor
 * integrity-protected (README, Security): someone who can read or rewrite the job's traffic
 * on the wire is outside what this protects against.
 */
#ifndef RING_AUTH_H
#define RING_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define RING__KEY_BYTES   32 /* crypto_auth_KEYBYTES */
#define RING__NONCE_BYTES 16 /* 128 bits: never repeats across the connections of any job */
#define RING__MAC_BYTES   32 /* crypto_auth_BYTES */
#define RING__KEY_HEX     (2 * RING__KEY_BYTES)

/* The environment variable that carries the secret to a rank that ringrun started. */
#define RING__SECRET_ENV "RING_JOB_SECRET"

struct ring__key {
    unsigned char bytes[RING__KEY_BYTES];
};

/* Who computes a MAC: each side's answer carries its own role, so that none is reflected. */
enum ring__auth_role { RING__ROLE_DIALER = 1, RING__ROLE_ACCEPTOR = 2 };

/*
 * What both MACs of one connection cover. Ranks of one job run the same build, so the
 * struct is hashed as it lies in memory; every byte is set (no padding is left out).
 */
struct ring__auth_transcript {
    char wire[8];      /* "tcp", "shm", "rdv": a proof for one wire is no proof for another */
    uint32_t dialer;   /* rank of the dialer (the rendezvous: the client's, or UINT32_MAX) */
    uint32_t acceptor; /* rank of the acceptor (the rendezvous server: UINT32_MAX) */
    uint32_t size;     /* the world's size */
    uint32_t pad;      /* zero */
    unsigned char dialer_nonce[RING__NONCE_BYTES];
    unsigned char acceptor_nonce[RING__NONCE_BYTES];
};

/*
 * Makes a new random key (libsodium's randombytes). Returns 0, or RING_ESYS when libsodium
 * cannot start (sodium_init failed: no entropy source).
 */
int ring__key_generate(struct ring__key *k);
/* Writes k as RING__KEY_HEX lowercase hex digits and a NUL into hex. */
void ring__key_hex(const struct ring__key *k, char hex[RING__KEY_HEX + 1]);
/* Parses exactly RING__KEY_HEX hex digits. Returns 0, or -1 (k untouched) on anything else. */
int ring__key_parse(const char *hex, struct ring__key *k);
/*
 * The key that ringrun gave this process in RING_JOB_SECRET. The variable is read, then its
 * value is overwritten in place and the variable removed from the environment, so that
 * neither the program's children nor /proc/PID/environ see it; the key is kept in memory
 * for a later ring_init of the same process. Returns 1 (k set), 0 (none: neither the
 * variable nor an earlier one), or RING_EENV (the variable is not 64 hex digits).
 */
int ring__key_from_env(struct ring__key *k);
/* Overwrites k (sodium_memzero). */
void ring__key_wipe(struct ring__key *k);

/* Fills n with RING__NONCE_BYTES random bytes. */
void ring__auth_nonce(unsigned char n[RING__NONCE_BYTES]);
/* The MAC that role sends for transcript t under key k. */
void ring__auth_mac(const struct ring__key *k, enum ring__auth_role role,
                    const struct ring__auth_transcript *t, unsigned char mac[RING__MAC_BYTES]);
/* 1 when mac is role's MAC of t under k, else 0. Constant time. */
int ring__auth_check(const struct ring__key *k, enum ring__auth_role role,
                     const struct ring__auth_transcript *t,
                     const unsigned char mac[RING__MAC_BYTES]);

/* Hex helpers for the line protocol of the rendezvous (rendezvous_protocol.c): encode n
 * bytes (2n digits and a NUL), and decode exactly 2n digits (0, or -1 on anything else). */
void ring__hex_encode(const unsigned char *p, size_t n, char *out);
int ring__hex_decode(const char *s, unsigned char *out, size_t n);

#endif /* RING_AUTH_H */
