/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes.c - REST API v1's dispatch over the route tables, and the routes other than jobs':
 * the cluster, the scheduler, tokens, the database's backup, the API's description and the
 * probes (the jobs' are in routes_jobs.c). A path that exists with another method gets 405 with
 * Allow; an unknown path gets 404.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "routes_impl.h"
#include "scheduler/backend/identity.h"

static api__handler cluster, healthz, readyz, openapi, token_create, token_list, token_revoke,
    scheduler_get, scheduler_put, admin_backup;

/* The rest of the API: the cluster, the scheduler, tokens, the API's own description and
 * the probes. */
static const struct api__route routes[] = {
    {"GET", "/v1/cluster", cluster},
    {"GET", "/v1/scheduler", scheduler_get},
    {"PUT", "/v1/scheduler", scheduler_put},
    {"POST", "/v1/tokens", token_create},
    {"GET", "/v1/tokens", token_list},
    {"DELETE", "/v1/tokens/{}", token_revoke},
    {"GET", "/v1/admin/backup", admin_backup},
    {"GET", "/v1/openapi.json", openapi},
    {"GET", "/healthz", healthz},
    {"GET", "/readyz", readyz},
    {NULL, NULL, NULL},
};

/* Every route, jobs first (routes_jobs.c), then the views over many jobs (routes_views.c). */
static const struct api__route *const tables[] = {api__job_routes, api__view_routes, routes, NULL};

/*
 * Matches path against pattern segment by segment; a "{}" segment matches any non-empty
 * segment, which is copied into param. Returns 1 on a match, 0 when there is none, and -1
 * when path matches but for a "{}" segment too long for param (its length in *toolong): no
 * id is that long, so the client gets told that rather than a bare 404.
 */
static int match(const char *pattern, const char *path, char *param, size_t len, size_t *toolong)
{
    int fit = 1;
    while (*pattern && *path) {
        size_t pl = strcspn(pattern, "/"), sl = strcspn(path, "/");
        if (pl == 2 && strncmp(pattern, "{}", 2) == 0) {
            if (sl == 0)
                return 0;
            if (sl >= len) {
                fit = -1;
                *toolong = sl;
            } else {
                memcpy(param, path, sl);
                param[sl] = '\0';
            }
        } else if (pl != sl || strncmp(pattern, path, pl) != 0) {
            return 0;
        }
        pattern += pl;
        path += sl;
        if (*pattern != *path)
            return 0;
        if (*pattern == '/') {
            pattern++;
            path++;
        }
    }
    return *pattern == '\0' && *path == '\0' ? fit : 0;
}

void api_handle(const struct api_config *cfg, const struct api_request *req,
                struct api_response *resp)
{
    char param[128];
    size_t used = 0, toolong = 0;
    const struct api__route *longer = NULL;

    memset(resp, 0, sizeof(*resp));
    for (const struct api__route *const *t = tables; *t; t++) {
        for (const struct api__route *r = *t; r->method; r++) {
            int m = match(r->pattern, req->path, param, sizeof(param), &toolong);
            if (m != 0 && strcmp(r->method, req->method) == 0) {
                if (m < 0) {
                    longer = r;
                    continue;
                }
                r->fn(cfg, req, param, resp);
                return;
            }
        }
    }
    if (longer != NULL) {
        /* "/v1/jobs/{}/logs": the collection the id belongs to is what precedes "{}". */
        int at = (int)(strstr(longer->pattern, "/{}") - longer->pattern);
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "the id after %.*s/ is %zu bytes long, but ids are at most %zu (see GET "
                    "%.*s)",
                    at, longer->pattern, toolong, sizeof(param) - 1, at, longer->pattern);
        return;
    }
    for (const struct api__route *const *t = tables; *t; t++) {
        for (const struct api__route *r = *t; r->method; r++) {
            if (match(r->pattern, req->path, param, sizeof(param), &toolong) != 0 &&
                used + strlen(r->method) + 3 < sizeof(resp->allow))
                used += (size_t)snprintf(resp->allow + used, sizeof(resp->allow) - used, "%s%s",
                                         used ? ", " : "", r->method);
        }
    }
    if (used > 0)
        api_problem(resp, 405, "method-not-allowed", "Method Not Allowed", req->path,
                    "%s is not allowed on %s; use %s", req->method, req->path, resp->allow);
    else
        api_problem(resp, 404, "not-found", "Not Found", req->path,
                    "no such resource: %s (see /v1/openapi.json)", req->path);
}

void api__store_problem(struct api_response *resp, const char *path, const struct error *err)
{
    if (errno == EBUSY)
        api_problem(resp, 503, "busy", "Service Unavailable", path,
                    "the job database is busy; retry shortly (%s)", err->text);
    else
        api_problem(resp, 500, "internal", "Internal Server Error", path,
                    "the job database failed: %s", err->text);
}

void api__sched_busy(struct api_response *resp, const char *path, const struct error *err)
{
    api_problem(resp, 503, "scheduler-busy", "Service Unavailable", path, "%s; retry in %d s",
                err->text, API_SCHED_RETRY_S);
    resp->retry_after = API_SCHED_RETRY_S;
}

void api_response_release(struct api_response *resp)
{
    int saved = errno;
    json_decref(resp->body);
    resp->body = NULL;
    free(resp->json_text);
    resp->json_text = NULL;
    if (resp->file && resp->file_fd >= 0)
        close(resp->file_fd);
    resp->file = 0;
    errno = saved;
}

/* A view of the scheduler (v, a new reference, or NULL): 200 with it, marked with its age
 * when the thread could not answer in time and this is what it said last. */
static void sched_view(const struct api_request *req, json_t *v, double age_s,
                       struct api_response *resp)
{
    if (v == NULL) {
        api_problem(resp, 503, "scheduler-busy", "Service Unavailable", req->path,
                    "the scheduler did not answer; retry in %d s", API_SCHED_RETRY_S);
        resp->retry_after = API_SCHED_RETRY_S;
        return;
    }
    resp->status = 200;
    resp->body = v;
    resp->age_s = (long)age_s;
}

/* GET /v1/cluster: the scheduler's view, or (while a backend call holds it) its last. */
static void cluster(const struct api_config *cfg, const struct api_request *req, const char *param,
                    struct api_response *resp)
{
    double age;
    json_t *snap = scheduler_snapshot(cfg->sched, &age);
    sched_view(req, snap, age, resp);
}

/*
 * The request's body as a JSON object (a new reference), or NULL with a 400 problem in resp
 * that says what is wrong and what is wanted: JSON that does not parse (or repeats a key),
 * or JSON that is not an object. POST /v1/jobs answers both alike (jobspec.c); 422 is for
 * an object whose fields are wrong.
 */
static json_t *body_object(const struct api_request *req, struct api_response *resp,
                           const char *want)
{
    json_error_t jerr;
    json_t *body =
        json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (body == NULL)
        api_problem(resp, 400, "malformed-json", "Malformed JSON", req->path,
                    "malformed JSON at line %d, column %d: %s; want %s", jerr.line, jerr.column,
                    jerr.text, want);
    else if (!json_is_object(body))
        api_problem(resp, 400, "malformed-json", "Malformed JSON", req->path,
                    "the body must be a JSON object, not %s; want %s",
                    json_is_array(body) ? "an array" : "a scalar", want);
    else
        return body;
    json_decref(body);
    return NULL;
}

/* A token's name: its principal's, shown as its jobs' owner in lists and logs. */
static int token_name_ok(const char *n)
{
    return n != NULL && *n != '\0' && strlen(n) <= 64 &&
           strspn(n, "abcdefghijklmnopqrstuvwxyz"
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789._-") == strlen(n);
}

/* The longest a token may live: 100 years, far past any real need, and a bound that keeps
 * now + expires_in and the year (4 digits in RFC 3339) in range. */
#define TOKEN_LIFE_MAX_S 3155760000LL

/*
 * An RFC 3339 date-time ("2027-01-31T12:00:00Z", "2027-01-31t13:00:00.5+01:00") as Unix
 * seconds, any fraction dropped, into *out. Returns 0, or -1 when s is not one.
 */
static int rfc3339(const char *s, int64_t *out)
{
    static const char form[] = "dddd-dd-ddTdd:dd:dd";
    int v[6], off = 0;
    struct tm tm = {0}, back;
    time_t t;
    const char *p = s;

    for (size_t i = 0; i < sizeof(form) - 1; i++, p++) {
        if (form[i] == 'd' ? (*p < '0' || *p > '9')
                           : (form[i] == 'T' ? (*p != 'T' && *p != 't') : *p != form[i]))
            return -1;
    }
    sscanf(s, "%4d-%2d-%2d%*c%2d:%2d:%2d", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    if (*p == '.') {
        if (p[1] < '0' || p[1] > '9')
            return -1;
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    }
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        off = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':' &&
               strspn(p + 1, "0123456789") == 2 && strspn(p + 4, "0123456789") == 2) {
        int h = (p[1] - '0') * 10 + (p[2] - '0'), m = (p[4] - '0') * 10 + (p[5] - '0');
        if (h > 23 || m > 59)
            return -1;
        off = (*p == '+' ? 1 : -1) * (h * 3600 + m * 60);
    } else {
        return -1;
    }
    /* timegm normalizes "02-30" into March: a date that comes back changed did not exist.
     * A leap second (:60) is not a time a token would be set to expire at. */
    tm.tm_year = v[0] - 1900;
    tm.tm_mon = v[1] - 1;
    tm.tm_mday = v[2];
    tm.tm_hour = v[3];
    tm.tm_min = v[4];
    tm.tm_sec = v[5];
    back = tm;
    t = timegm(&tm);
    if (t == (time_t)-1 || tm.tm_year != back.tm_year || tm.tm_mon != back.tm_mon ||
        tm.tm_mday != back.tm_mday || tm.tm_hour != back.tm_hour || tm.tm_min != back.tm_min ||
        tm.tm_sec != back.tm_sec)
        return -1;
    *out = (int64_t)t - off;
    return 0;
}

/*
 * A token request's expiry: "expires_in" seconds from now, or "expires_at" an RFC 3339 time,
 * or neither (never). Returns 0 with *expires (0: never), or -1 with a 422 in resp.
 */
static int token_expiry(const struct api_request *req, struct api_response *resp, json_t *body,
                        int64_t *expires)
{
    json_t *in = json_object_get(body, "expires_in"), *at = json_object_get(body, "expires_at");
    int64_t now = (int64_t)time(NULL);

    *expires = 0;
    if (in != NULL && at != NULL) {
        api_problem(resp, 422, "validation-error", "Invalid token request", req->path,
                    "give expires_in or expires_at, not both");
        return -1;
    }
    if (in != NULL) {
        if (!json_is_integer(in) || json_integer_value(in) < 1 ||
            json_integer_value(in) > TOKEN_LIFE_MAX_S) {
            api_problem(resp, 422, "validation-error", "Invalid token request", req->path,
                        "expires_in must be an integer number of seconds in [1, %lld]",
                        TOKEN_LIFE_MAX_S);
            return -1;
        }
        *expires = now + (int64_t)json_integer_value(in);
    } else if (at != NULL) {
        if (!json_is_string(at) || rfc3339(json_string_value(at), expires) < 0) {
            api_problem(resp, 422, "validation-error", "Invalid token request", req->path,
                        "expires_at must be an RFC 3339 date-time such as "
                        "\"2027-01-31T12:00:00Z\" or \"2027-01-31T13:00:00+01:00\"");
            return -1;
        }
        if (*expires <= now || *expires - now > TOKEN_LIFE_MAX_S) {
            api_problem(resp, 422, "validation-error", "Invalid token request", req->path,
                        "expires_at '%.40s' is %s", json_string_value(at),
                        *expires <= now ? "not in the future" : "more than 100 years away");
            return -1;
        }
    }
    return 0;
}

/*
 * POST /v1/tokens {"name": "alice", "admin": false, "user": "alice", "expires_in": 86400}:
 * admins create tokens for users. "user" is the Unix account the token's jobs run as (when
 * ringd runs as root); it must exist here, and a ringd that is not root accepts only its own
 * account. The token speaks for a principal (store.h): the live one of that name and user,
 * whose jobs it sees (another key for the same person), or a new one; a name that is live
 * for another user, or for the other kind of token, is refused (409).
 */
static void token_create(const struct api_config *cfg, const struct api_request *req,
                         const char *param, struct api_response *resp)
{
    json_t *body, *admin, *user;
    char token[128];
    struct error err;
    struct identity id;
    const char *n, *key, *u = NULL;
    json_t *v;
    int64_t expires, principal = 0;

    if (!req->admin) {
        api_problem(resp, 403, "forbidden", "Forbidden", req->path,
                    "only an admin token can create tokens");
        return;
    }
    body = body_object(req, resp, "{\"name\": \"...\", \"admin\": false, \"user\": \"...\"}");
    if (body == NULL)
        return;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "name") && strcmp(key, "admin") && strcmp(key, "user") &&
            strcmp(key, "expires_in") && strcmp(key, "expires_at")) {
            api_problem(resp, 422, "validation-error", "Invalid token request", req->path,
                        "unknown field '%.64s'; a token has name, admin, user, and expires_in "
                        "or expires_at",
                        key);
            json_decref(body);
            return;
        }
    }
    n = json_string_value(json_object_get(body, "name"));
    admin = json_object_get(body, "admin");
    user = json_object_get(body, "user");
    if (!token_name_ok(n) || (admin != NULL && !json_is_boolean(admin)) ||
        (user != NULL && (!json_is_string(user) || !token_name_ok(json_string_value(user))))) {
        api_problem(resp, 422, "validation-error", "Invalid token request", req->path,
                    "name (and user) must be 1..64 letters, digits, '.', '_' or '-'; admin a "
                    "boolean");
        json_decref(body);
        return;
    }
    if (token_expiry(req, resp, body, &expires) < 0) {
        json_decref(body);
        return;
    }
    if (user != NULL) {
        u = json_string_value(user);
        if (identity_lookup(u, &id, &err) < 0) {
            api_problem(resp, 422, "validation-error", "Invalid token request", req->path,
                        "user: %s", err.text);
            json_decref(body);
            return;
        }
    }
    if (cfg->token_create(req->store, n, json_is_true(admin), u, expires, token, &principal, &err) <
        0) {
        if (errno == EEXIST)
            api_problem(resp, 409, "token-name-taken", "Conflict", req->path,
                        "%s; a name speaks for one person, who owns its jobs", err.text);
        else
            api__store_problem(resp, req->path, &err);
        json_decref(body);
        return;
    }
    resp->status = 201;
    /* The id is the token's public part ("ringd_<id>_<secret>"): what list and revoke use. */
    resp->body =
        json_pack("{s:s%, s:s, s:I, s:b, s:s}", "id", token + 6, (size_t)12, "name", n, "principal",
                  (json_int_t)principal, "admin", json_is_true(admin), "token", token);
    if (resp->body != NULL && u != NULL)
        json_object_set_new(resp->body, "user", json_string(u));
    if (resp->body != NULL && expires > 0) {
        /* As GET /v1/tokens shows it (store.c): UTC, whole seconds. */
        char when[32];
        time_t t = (time_t)expires;
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        json_object_set_new(resp->body, "expires_at", json_string(when));
    }
    json_decref(body);
}

/* GET /v1/tokens: admins see every token, users their principal's; never a secret. */
static void token_list(const struct api_config *cfg, const struct api_request *req,
                       const char *param, struct api_response *resp)
{
    json_t *tokens;
    struct error err;
    if (store_token_list(req->store, req->admin ? STORE_ANYONE : req->principal, &tokens, &err) <
        0) {
        api__store_problem(resp, req->path, &err);
        return;
    }
    resp->status = 200;
    resp->body = json_pack("{s:o}", "tokens", tokens);
}

/* DELETE /v1/tokens/{id}: revokes at once (the server forgets the tokens it had checked).
 * Users revoke their principal's tokens; admins anyone's. Revoking a principal's last token
 * retires its name: a new token of that name is someone new. */
static void token_revoke(const struct api_config *cfg, const struct api_request *req,
                         const char *param, struct api_response *resp)
{
    struct error err;
    json_t *token;

    if (store_token_revoke(req->store, param, req->admin ? STORE_ANYONE : req->principal, &token,
                           &err) < 0) {
        if (errno == EPERM)
            api_problem(resp, 409, "last-admin-token", "Conflict", req->path,
                        "token %s is the last admin token: without it nobody could create or "
                        "revoke tokens; create another admin token first",
                        param);
        else if (errno == ENOENT)
            api_problem(resp, 404, "token-not-found", "Not Found", req->path,
                        "there is no token %s (or it is not yours); see GET /v1/tokens", param);
        else
            api__store_problem(resp, req->path, &err);
        return;
    }
    if (cfg->token_revoked != NULL)
        cfg->token_revoked();
    resp->status = 200;
    resp->body = token;
}

/*
 * GET /v1/admin/backup: the database as of one commit (store_backup: SQLite's online backup
 * API, while jobs keep being written), as application/vnd.sqlite3; admins only, since it
 * holds every job and every token's hash. The copy is made in the data directory, which is
 * as private as the database, never at a path the client names.
 */
static void admin_backup(const struct api_config *cfg, const struct api_request *req,
                         const char *param, struct api_response *resp)
{
    struct error err;
    int64_t size;
    int fd;

    if (!req->admin) {
        api_problem(resp, 403, "forbidden", "Forbidden", req->path,
                    "only an admin token can take a backup: it holds every job and token");
        return;
    }
    if (store_backup(req->store, cfg->data_dir, &fd, &size, &err) < 0) {
        if (errno == ENOSPC)
            api_problem(resp, 507, "no-space", "Insufficient Storage", req->path,
                        "no room for the backup's copy in ringd's data directory: %s; free some "
                        "space and retry",
                        err.text);
        else
            api__store_problem(resp, req->path, &err);
        return;
    }
    resp->status = 200;
    resp->file = 1;
    resp->file_fd = fd;
    resp->file_offset = 0;
    resp->file_len = size;
    resp->file_type = "application/vnd.sqlite3";
    resp->log_offset = -1;
}

static void healthz(const struct api_config *cfg, const struct api_request *req, const char *param,
                    struct api_response *resp)
{
    resp->status = 200;
    resp->body = json_pack("{s:s}", "status", "ok");
}

static void readyz(const struct api_config *cfg, const struct api_request *req, const char *param,
                   struct api_response *resp)
{
    if (store_schema_version(req->store) < 1) {
        api_problem(resp, 503, "not-ready", "Service Unavailable", req->path,
                    "the job database is not readable");
        return;
    }
    resp->status = 200;
    resp->body = json_pack("{s:s}", "status", "ready");
}

static void openapi(const struct api_config *cfg, const struct api_request *req, const char *param,
                    struct api_response *resp)
{
    /* Static text, checked by tests/contract: served as it is. */
    resp->json_text = strdup(api_openapi());
    if (resp->json_text == NULL)
        api_problem(resp, 503, "busy", "Service Unavailable", req->path,
                    "out of memory; retry shortly");
    else
        resp->status = 200;
}

/* GET /v1/scheduler: the policy, the other policies, the backend and the loop's figures
 * (while a backend call holds the scheduler, as it last said them). */
static void scheduler_get(const struct api_config *cfg, const struct api_request *req,
                          const char *param, struct api_response *resp)
{
    double age;
    json_t *info = scheduler_info(cfg->sched, &age);
    sched_view(req, info, age, resp);
}

/* PUT /v1/scheduler {"policy": "dynamic"}: admins switch the policy at runtime (until ringd
 * restarts; ringd.conf's `policy` is the default). */
static void scheduler_put(const struct api_config *cfg, const struct api_request *req,
                          const char *param, struct api_response *resp)
{
    json_t *body, *policy, *info = NULL;
    const char *key;
    json_t *v;
    struct error err;

    if (!req->admin) {
        api_problem(resp, 403, "forbidden", "Forbidden", req->path,
                    "only an admin token can change the scheduling policy");
        return;
    }
    body = body_object(req, resp,
                       "{\"policy\": \"fifo\" | \"priority\" | \"tiresias\" | \"dynamic\"}");
    if (body == NULL)
        return;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "policy") != 0) {
            api_problem(resp, 422, "validation-error", "Invalid scheduler settings", req->path,
                        "unknown field '%.60s'; only policy can be changed at runtime", key);
            json_decref(body);
            return;
        }
    }
    policy = json_object_get(body, "policy");
    if (!json_is_string(policy)) {
        api_problem(resp, 422, "validation-error", "Invalid scheduler settings", req->path,
                    "policy is required: one of %s", policy_names());
        json_decref(body);
        return;
    }
    if (scheduler_set_policy(cfg->sched, json_string_value(policy), &info, &err) < 0) {
        if (errno == ETIMEDOUT) {
            api__sched_busy(resp, req->path, &err);
        } else if (errno == EINPROGRESS) { /* taken: the switch happens, see GET */
            api_problem(resp, 503, "scheduler-busy", "Service Unavailable", req->path,
                        "%s; see GET /v1/scheduler in %d s", err.text, API_SCHED_RETRY_S);
            resp->retry_after = API_SCHED_RETRY_S;
        } else {
            api_problem(resp, 422, "validation-error", "Invalid scheduler settings", req->path,
                        "%s", err.text);
        }
        json_decref(body);
        return;
    }
    json_decref(body);
    resp->status = 200;
    resp->body = info;
}
