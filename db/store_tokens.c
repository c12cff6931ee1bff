/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_tokens.c - API tokens and the principals they speak for (store.h says the rules).
 *
 * Why principals: a job used to belong to its token's name, so whoever got a token of that
 * name (for another Unix user, or after the name's tokens were revoked) got its jobs too.
 * Kubernetes has the same split: a user's name is what RBAC rules read, and its UID "is a
 * unique value that identifies this user across time; if this user is deleted and another
 * user by the same name is added, they will have different UIDs". Slurm keys jobs on the
 * Unix uid, which does not fit here: tokens may name no Unix user, a ringd that is not root
 * runs every job as its own uid, and a uid can be given to someone else later. So a
 * principal has an id that is never reused, and its name and Unix user as attributes.
 *
 * The SQL text is store.c's, with the rest.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "store_impl.h"

/* 1 when a principal's Unix user (column, NULL: none) is user (NULL: none). */
static int same_user(sqlite3_stmt *s, int col, const char *user)
{
    if (sqlite3_column_type(s, col) == SQLITE_NULL)
        return user == NULL;
    return user != NULL && strcmp(store__col(s, col), user) == 0;
}

/*
 * Inside the open transaction: the live principal named name that a new token for unix_user
 * of kind admin joins, into *id; or a new one. -1 with EEXIST and what to do in err when a
 * live principal of that name belongs to another Unix user, or is of the other kind.
 */
static int principal_for(struct store *st, const char *name, const char *unix_user, int admin,
                         int64_t *id, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_PRINCIPAL_LIVE];
    char other[64] = "", now[40];
    int64_t found = 0, other_id = 0;
    int rc, found_admin = 0;

    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (same_user(s, 1, unix_user)) {
            found = sqlite3_column_int64(s, 0);
            found_admin = sqlite3_column_int(s, 2);
        } else if (other_id == 0) {
            other_id = sqlite3_column_int64(s, 0);
            snprintf(other, sizeof(other), "%s",
                     sqlite3_column_type(s, 1) == SQLITE_NULL ? "" : store__col(s, 1));
        }
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return store__fail(st, rc, err, "principal lookup");
    if (found != 0 && found_admin != admin)
        return errno = EEXIST,
               errprintf(err, "name '%s' belongs to %s token; give this %s token a name of its own",
                         name, admin ? "a user" : "an admin", admin ? "admin" : "user");
    if (found == 0 && other_id != 0)
        return errno = EEXIST,
               errprintf(err,
                         "name '%s' has live tokens for %s%s%s; pick another name, or revoke "
                         "all of them first (the name is then free, and its jobs stay theirs)",
                         name, other[0] ? "Unix user '" : "no Unix user", other,
                         other[0] ? "'" : "");
    if (found != 0) {
        *id = found;
        return 0;
    }
    s = st->stmt[S_PRINCIPAL_INSERT];
    clock_rfc3339(now, sizeof(now));
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, unix_user, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, now, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        rc = sqlite3_step(s);
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return store__fail(st, rc, err, "insert principal");
    return 0;
}

int store_token_create(struct store *st, const char *id, const char *name, const char *hash,
                       int admin, const char *unix_user, int64_t expires, int64_t *principal,
                       struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_INSERT];
    int64_t who = 0;
    char now[40];

    /* One transaction: the principal a token joins cannot be retired (its last other token
     * revoked) between the lookup and the insert. */
    if (store__begin(st, err) < 0)
        return -1;
    if (principal_for(st, name, unix_user, admin, &who, err) < 0)
        return store__rollback(st);
    clock_rfc3339(now, sizeof(now));
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, hash, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, admin);
    sqlite3_bind_text(s, 5, now, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, unix_user, -1, SQLITE_STATIC);
    if (expires > 0)
        sqlite3_bind_int64(s, 7, expires);
    sqlite3_bind_int64(s, 8, who);
    if (store__step_done(st, s, err, "insert token") < 0)
        return store__rollback(st);
    if (store__commit(st, err) < 0)
        return -1;
    if (principal != NULL)
        *principal = who;
    return 0;
}

int store_token_find(struct store *st, const char *id, struct store_token *out, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_FIND];
    int rc;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        snprintf(out->hash, sizeof(out->hash), "%s", store__col(s, 0));
        snprintf(out->name, sizeof(out->name), "%s", store__col(s, 1));
        out->admin = sqlite3_column_int(s, 2);
        snprintf(out->user, sizeof(out->user), "%s",
                 sqlite3_column_type(s, 3) == SQLITE_NULL ? "" : store__col(s, 3));
        out->expires = sqlite3_column_int64(s, 4); /* NULL reads 0: never */
        out->principal = sqlite3_column_int64(s, 5);
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_DONE)
        return errno = ENOENT, errprintf(err, "no such token");
    if (rc != SQLITE_ROW)
        return store__fail(st, rc, err, "token lookup");
    /* Every token has had one since migration 9: one without would own nothing, and must
     * not pass for the local caller of a ringd without auth (STORE_LOCAL). */
    if (out->principal <= 0)
        return errno = EIO, errprintf(err, "token %s has no principal", id);
    return 0;
}

int store_token_count(struct store *st, int *count, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_COUNT];
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *count = sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return store__fail(st, rc, err, "token count");
    return 0;
}

/* The token row under s (SQL_TOKEN_LIST's columns) as JSON; never its hash. */
static json_t *token_json(sqlite3_stmt *s)
{
    json_t *t = json_pack("{s:s, s:s, s:I, s:b, s:s}", "id", store__col(s, 0), "name",
                          store__col(s, 1), "principal", (json_int_t)sqlite3_column_int64(s, 7),
                          "admin", sqlite3_column_int(s, 2), "created_at", store__col(s, 3));
    if (t != NULL && sqlite3_column_type(s, 4) != SQLITE_NULL)
        json_object_set_new(t, "revoked_at", json_string(store__col(s, 4)));
    if (t != NULL && sqlite3_column_type(s, 5) != SQLITE_NULL)
        json_object_set_new(t, "user", json_string(store__col(s, 5)));
    if (t != NULL && sqlite3_column_type(s, 6) != SQLITE_NULL)
        json_object_set_new(t, "expires_at", json_string(store__col(s, 6)));
    return t;
}

int store_token_list(struct store *st, int64_t principal, json_t **out, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_LIST];
    json_t *arr = json_array();
    int rc;
    if (arr == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    if (principal != STORE_ANYONE)
        sqlite3_bind_int64(s, 1, principal);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        json_array_append_new(arr, token_json(s));
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return store__fail(st, rc, err, "token list");
    }
    *out = arr;
    return 0;
}

int store_token_revoke(struct store *st, const char *id, int64_t principal, json_t **out,
                       struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_REVOKE];
    json_t *t = NULL;
    char now[40];
    int rc;

    clock_rfc3339(now, sizeof(now));
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (principal != STORE_ANYONE)
        sqlite3_bind_int64(s, 2, principal);
    sqlite3_bind_text(s, 3, now, -1, SQLITE_STATIC);
    /* One statement: its trigger (tokens_retire) retires the principal with the last token. */
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        t = token_json(s);
        rc = sqlite3_step(s);
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_NOTFOUND;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_NOTFOUND) {
        struct store_token live;
        if (store_token_find(st, id, &live, err) == 0 && live.admin &&
            (principal == STORE_ANYONE || live.principal == principal))
            return errno = EPERM, errprintf(err, "token %s is the last admin token", id);
        return errno = ENOENT, errprintf(err, "no token %s", id);
    }
    if (rc != SQLITE_DONE) {
        json_decref(t);
        return store__fail(st, rc, err, "revoke token");
    }
    if (out != NULL)
        *out = t;
    else
        json_decref(t);
    return 0;
}
