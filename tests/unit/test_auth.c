/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of ringd's bearer tokens (server/auth.c) against a real SQLite store: token
 * format and parsing, the stored hash, the comparison, revocation, and what never leaks.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db/store.h"
#include "server/auth.h"
#include "unit.h"

static char path[64];

static struct store *open_fresh(void)
{
    struct store *st;
    struct error err;
    int fd;

    snprintf(path, sizeof(path), "/tmp/ring-auth-XXXXXX");
    fd = mkstemp(path);
    close(fd);
    unlink(path);
    ck_assert_int_eq(auth_init(), 0);
    ck_assert_msg(store_open(path, &st, &err) == 0, "%s", err.text);
    return st;
}

static void close_and_remove(struct store *st)
{
    char p[80];
    store_close(st);
    unlink(path);
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
    unlink(p);
}

/* auth_check on a header; the identity lands in who, which starts out as "nobody". */
static struct auth_identity who;
static struct error err;

static int check_header(struct store *st, const char *header)
{
    memset(&who, 0, sizeof(who));
    snprintf(who.owner, sizeof(who.owner), "nobody");
    who.admin = -1;
    memset(&err, 0, sizeof(err));
    return auth_check(st, header, &who, &err);
}

static int check_token(struct store *st, const char *token)
{
    char header[AUTH_TOKEN_LEN + 16];
    snprintf(header, sizeof(header), "Bearer %s", token);
    return check_header(st, header);
}

static void expect_refused(int rc, const char *why)
{
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(err.text, why) != NULL, "refused with '%s', want '%s'", err.text, why);
}

static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strchr("0123456789abcdef", s[i]) == NULL || s[i] == '\0')
            return 0;
    return 1;
}

START_TEST(created_token_has_the_documented_form)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN];

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, tok, NULL, &err), 0);
    ck_assert_uint_eq(strlen(tok), 6 + 12 + 1 + 64);
    ck_assert_int_eq(strncmp(tok, "ringd_", 6), 0);
    ck_assert(is_hex(tok + 6, 12));
    ck_assert_int_eq(tok[18], '_');
    ck_assert(is_hex(tok + 19, 64));
    close_and_remove(st);
}
END_TEST

START_TEST(created_token_checks_with_its_owner)
{
    struct store *st = open_fresh();
    char user[AUTH_TOKEN_LEN], root[AUTH_TOKEN_LEN];

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, user, NULL, &err), 0);
    ck_assert_int_eq(auth_token_create(st, "root", 1, NULL, 0, root, NULL, &err), 0);
    ck_assert_int_eq(check_token(st, user), 0);
    ck_assert_str_eq(who.owner, "alice");
    ck_assert_str_eq(who.user, "");
    ck_assert_int_eq(who.admin, 0);
    ck_assert_int_eq(check_token(st, root), 0);
    ck_assert_str_eq(who.owner, "root");
    ck_assert_int_eq(who.admin, 1);
    close_and_remove(st);
}
END_TEST

/* The Unix user a token was created with is what its jobs run as. */
START_TEST(unix_user_comes_with_the_token)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN];

    ck_assert_int_eq(auth_token_create(st, "alice", 0, "alice1", 0, tok, NULL, &err), 0);
    ck_assert_int_eq(check_token(st, tok), 0);
    ck_assert_str_eq(who.owner, "alice");
    ck_assert_str_eq(who.user, "alice1");
    close_and_remove(st);
}
END_TEST

/*
 * A token speaks for a principal, not for its name: two tokens named alike are one identity
 * only for the same Unix user; another user's is refused, and a name given out again after
 * its tokens were revoked is a new identity.
 */
START_TEST(identity_is_the_principal_not_the_name)
{
    struct store *st = open_fresh();
    char a1[AUTH_TOKEN_LEN], a2[AUTH_TOKEN_LEN], b[AUTH_TOKEN_LEN];
    int64_t p1, p2, pb;

    ck_assert_int_eq(auth_token_create(st, "alice", 0, "alice1", 0, a1, &p1, &err), 0);
    ck_assert_int_eq(check_token(st, a1), 0);
    ck_assert_int_eq(who.principal, p1);
    ck_assert_int_gt(who.principal, 0);
    ck_assert_int_eq(auth_token_create(st, "alice", 0, "alice2", 0, b, &pb, &err), -1);
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_int_eq(auth_token_create(st, "alice", 0, "alice1", 0, a2, &p2, &err), 0);
    ck_assert_int_eq(p2, p1); /* a second key of the same person */
    ck_assert_int_eq(check_token(st, a2), 0);
    ck_assert_int_eq(who.principal, p1);
    {
        char id1[13], id2[13];
        snprintf(id1, sizeof(id1), "%.12s", a1 + 6);
        snprintf(id2, sizeof(id2), "%.12s", a2 + 6);
        ck_assert_int_eq(store_token_revoke(st, id1, STORE_ANYONE, NULL, &err), 0);
        ck_assert_int_eq(store_token_revoke(st, id2, STORE_ANYONE, NULL, &err), 0);
    }
    ck_assert_int_eq(auth_token_create(st, "alice", 0, "alice2", 0, b, &pb, &err), 0);
    ck_assert_int_ne(pb, p1);
    ck_assert_int_eq(check_token(st, b), 0);
    ck_assert_str_eq(who.owner, "alice");
    ck_assert_int_eq(who.principal, pb);
    close_and_remove(st);
}
END_TEST

/* A token made in two steps (the first admin token's way) checks like any other, and exists
 * only once stored. */
START_TEST(generated_token_exists_once_stored)
{
    struct store *st = open_fresh();
    struct auth_new_token t;
    int64_t p;

    auth_token_generate(&t);
    ck_assert_uint_eq(strlen(t.token), 6 + 12 + 1 + 64);
    ck_assert_int_eq(strncmp(t.token + 6, t.id, 12), 0);
    ck_assert_int_eq(check_token(st, t.token), -1);
    ck_assert_int_eq(auth_token_store(st, &t, "admin", 1, NULL, 0, &p, &err), 0);
    ck_assert_int_eq(check_token(st, t.token), 0);
    ck_assert_int_eq(who.admin, 1);
    ck_assert_int_eq(who.principal, p);
    close_and_remove(st);
}
END_TEST

START_TEST(tokens_differ)
{
    struct store *st = open_fresh();
    char a[AUTH_TOKEN_LEN], b[AUTH_TOKEN_LEN];

    ck_assert_int_eq(auth_token_create(st, "a", 0, NULL, 0, a, NULL, &err), 0);
    ck_assert_int_eq(auth_token_create(st, "a", 0, NULL, 0, b, NULL, &err), 0);
    ck_assert_int_ne(memcmp(a + 6, b + 6, 12), 0);   /* ids */
    ck_assert_int_ne(memcmp(a + 19, b + 19, 64), 0); /* secrets */
    close_and_remove(st);
}
END_TEST

START_TEST(scheme_is_case_insensitive)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN], h[AUTH_TOKEN_LEN + 16];

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, tok, NULL, &err), 0);
    snprintf(h, sizeof(h), "bearer %s", tok);
    ck_assert_int_eq(check_header(st, h), 0);
    snprintf(h, sizeof(h), "BEARER %s", tok);
    ck_assert_int_eq(check_header(st, h), 0);
    close_and_remove(st);
}
END_TEST

START_TEST(missing_header_or_other_scheme_is_refused)
{
    struct store *st = open_fresh();

    expect_refused(check_header(st, NULL), "Authorization: Bearer <token> header is required");
    ck_assert_int_eq(errno, EACCES);
    expect_refused(check_header(st, "Basic YWxpY2U6c2VjcmV0"), "must be 'Bearer <token>'");
    ck_assert_int_eq(errno, EACCES);
    expect_refused(check_header(st, "Bearer"), "must be 'Bearer <token>'");
    expect_refused(check_header(st, ""), "must be 'Bearer <token>'");
    close_and_remove(st);
}
END_TEST

START_TEST(malformed_tokens_are_refused)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN], bad[AUTH_TOKEN_LEN + 2];

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, tok, NULL, &err), 0);
    /* one character short, one too many */
    snprintf(bad, sizeof(bad), "%.*s", (int)strlen(tok) - 1, tok);
    expect_refused(check_token(st, bad), "not a ringd token");
    snprintf(bad, sizeof(bad), "%s0", tok);
    expect_refused(check_token(st, bad), "not a ringd token");
    /* another prefix */
    snprintf(bad, sizeof(bad), "%s", tok);
    bad[4] = 'x';
    expect_refused(check_token(st, bad), "not a ringd token");
    /* no separator between id and secret */
    snprintf(bad, sizeof(bad), "%s", tok);
    bad[18] = 'a';
    expect_refused(check_token(st, bad), "not a ringd token");
    ck_assert_int_eq(errno, EACCES);
    /* a space before the token */
    snprintf(bad, sizeof(bad), " %s", tok);
    expect_refused(check_token(st, bad), "not a ringd token");
    expect_refused(check_token(st, ""), "not a ringd token");
    close_and_remove(st);
}
END_TEST

/* The stored hash is the hex SHA-256 of the secret: the expected value below comes from
 * coreutils' sha256sum, not from libsodium. */
#define VEC_SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define VEC_SHA256 "a8ae6e6ee929abea3afcfc5258c8ccd6f85273e0d4626d26c7279f3250f77c8e"

START_TEST(stored_hash_is_sha256_of_the_secret)
{
    struct store *st = open_fresh();

    ck_assert_int_eq(
        store_token_create(st, "0000000000a1", "vec", VEC_SHA256, 0, NULL, 0, NULL, &err), 0);
    ck_assert_int_eq(check_token(st, "ringd_0000000000a1_" VEC_SECRET), 0);
    ck_assert_str_eq(who.owner, "vec");
    close_and_remove(st);
}
END_TEST

/* A hash that differs from the right one in a single hex digit, wherever it is, fails: the
 * comparison covers all 64 digits. (It is sodium_memcmp, whose time does not depend on
 * where the first difference is; that is by construction, not measured here.) */
START_TEST(compare_covers_every_digit)
{
    struct store *st = open_fresh();

    for (int i = 0; i < 64; i++) {
        char hash[65] = VEC_SHA256, id[13], tok[96];
        hash[i] = hash[i] == '0' ? '1' : '0';
        snprintf(id, sizeof(id), "%012x", 0xb00 + i);
        ck_assert_int_eq(store_token_create(st, id, "near", hash, 0, NULL, 0, NULL, &err), 0);
        snprintf(tok, sizeof(tok), "ringd_%s_%s", id, VEC_SECRET);
        expect_refused(check_token(st, tok), "unknown or revoked");
        ck_assert_int_eq(errno, EACCES);
    }
    close_and_remove(st);
}
END_TEST

START_TEST(wrong_secret_is_refused)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN];
    size_t last;

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, tok, NULL, &err), 0);
    last = strlen(tok) - 1;
    tok[last] = tok[last] == '0' ? '1' : '0';
    expect_refused(check_token(st, tok), "unknown or revoked");
    tok[last] = tok[last] == '0' ? '1' : '0';
    tok[19] = tok[19] == '0' ? '1' : '0';
    expect_refused(check_token(st, tok), "unknown or revoked");
    /* nothing about the id's owner on failure */
    ck_assert_str_eq(who.owner, "nobody");
    ck_assert_int_eq(who.admin, -1);
    close_and_remove(st);
}
END_TEST

START_TEST(unknown_id_is_refused)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN];

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, tok, NULL, &err), 0);
    memcpy(tok + 6, "ffffffffffff", 12);
    expect_refused(check_token(st, tok), "unknown or revoked");
    close_and_remove(st);
}
END_TEST

START_TEST(revoked_token_is_refused)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN], other[AUTH_TOKEN_LEN], id[13];
    unsigned gen = auth_generation();

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, tok, NULL, &err), 0);
    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, other, NULL, &err), 0);
    ck_assert_int_eq(check_token(st, tok), 0);
    snprintf(id, sizeof(id), "%.12s", tok + 6);
    ck_assert_int_eq(store_token_revoke(st, id, STORE_ANYONE, NULL, &err), 0);
    auth_revoked();
    ck_assert_uint_ne(auth_generation(), gen);
    expect_refused(check_token(st, tok), "unknown or revoked");
    ck_assert_int_eq(check_token(st, other), 0); /* only that token */
    close_and_remove(st);
}
END_TEST

/* A token past its expiry is refused saying so (EKEYEXPIRED, and when), but only to someone
 * who holds its secret; one not yet expired works, and carries its expiry. */
START_TEST(expired_token_is_refused_saying_when)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN], live[AUTH_TOKEN_LEN], when[32];
    time_t past = time(NULL) - 3600;
    struct tm tm;

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, (int64_t)past, tok, NULL, &err), 0);
    ck_assert_int_eq(
        auth_token_create(st, "alice", 0, NULL, (int64_t)time(NULL) + 3600, live, NULL, &err), 0);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&past, &tm));
    ck_assert_int_eq(check_token(st, tok), -1);
    ck_assert_int_eq(errno, EKEYEXPIRED);
    ck_assert_msg(strstr(err.text, "expired at ") != NULL && strstr(err.text, when) != NULL,
                  "'%s' does not say it expired at %s", err.text, when);
    ck_assert_ptr_null(strstr(err.text, tok + 19)); /* never the secret */
    tok[AUTH_TOKEN_LEN - 1] = '\0';
    tok[strlen(tok) - 1] = tok[strlen(tok) - 1] == '0' ? '1' : '0';
    expect_refused(check_token(st, tok), "unknown or revoked"); /* a wrong secret learns nothing */
    ck_assert_int_eq(errno, EACCES);
    ck_assert_int_eq(check_token(st, live), 0);
    ck_assert(who.expires > (int64_t)time(NULL));
    close_and_remove(st);
}
END_TEST

/* Error texts go to logs and to clients: they never carry the secret. */
START_TEST(errors_never_echo_the_secret)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN], secret[65], bad[AUTH_TOKEN_LEN + 2];

    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, tok, NULL, &err), 0);
    memcpy(secret, tok + 19, 64);
    secret[64] = '\0';
    snprintf(bad, sizeof(bad), "%s0", tok);
    ck_assert_int_eq(check_token(st, bad), -1);
    ck_assert_ptr_null(strstr(err.text, secret));
    memcpy(bad, tok, strlen(tok) + 1);
    memcpy(bad + 6, "ffffffffffff", 12);
    ck_assert_int_eq(check_token(st, bad), -1);
    ck_assert_ptr_null(strstr(err.text, secret));
    close_and_remove(st);
}
END_TEST

static int file_holds(const char *file, const char *needle)
{
    FILE *f = fopen(file, "rb");
    char *data;
    long n;
    int found = 0;

    if (f == NULL)
        return 0;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    data = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(data);
    ck_assert_int_eq(fread(data, 1, (size_t)n, f), n);
    fclose(f);
    for (long i = 0; i + (long)strlen(needle) <= n && !found; i++)
        found = memcmp(data + i, needle, strlen(needle)) == 0;
    free(data);
    return found;
}

/* The database holds the hash, never the secret: the database and its WAL are searched
 * for both (finding the hash shows that the search looks at the right bytes). */
START_TEST(secret_is_never_stored)
{
    struct store *st = open_fresh();
    char tok[AUTH_TOKEN_LEN], wal[80];

    ck_assert_int_eq(
        store_token_create(st, "0000000000a1", "vec", VEC_SHA256, 0, NULL, 0, NULL, &err), 0);
    ck_assert_int_eq(auth_token_create(st, "alice", 0, NULL, 0, tok, NULL, &err), 0);
    snprintf(wal, sizeof(wal), "%s-wal", path);
    ck_assert(file_holds(path, VEC_SHA256) || file_holds(wal, VEC_SHA256));
    ck_assert(!file_holds(path, tok + 19) && !file_holds(wal, tok + 19));
    close_and_remove(st);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {created_token_has_the_documented_form,
                            created_token_checks_with_its_owner,
                            unix_user_comes_with_the_token,
                            identity_is_the_principal_not_the_name,
                            generated_token_exists_once_stored,
                            tokens_differ,
                            scheme_is_case_insensitive,
                            missing_header_or_other_scheme_is_refused,
                            malformed_tokens_are_refused,
                            stored_hash_is_sha256_of_the_secret,
                            compare_covers_every_digit,
                            wrong_secret_is_refused,
                            unknown_id_is_refused,
                            revoked_token_is_refused,
                            expired_token_is_refused_saying_when,
                            errors_never_echo_the_secret,
                            secret_is_never_stored,
                            NULL};
    return unit_main("auth", tests, 30);
}
