/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_routes - REST API v1's router and handlers (api/routes.c, through api_handle) on any
 * request: method, path segments and ids, query values, headers and body, against a real
 * store (SQLite in a temporary directory) holding three finished jobs and one token.
 *
 * The input is a request as text (the corpus reads like HTTP):
 *     METHOD TARGET [OWNER]\n      TARGET is PATH[?k=v&k=v...]; no OWNER: an admin
 *     Name: value\n ...            headers, up to an empty line
 *     \n BODY                      the body (absent without the empty line)
 * In TARGET, $1, $2 and $3 stand for the fixture's job ids and $T for its token id (they
 * are random per store). Query values are given to the API as they are, not %-decoded:
 * the bytes are what libmicrohttpd would hand over after decoding.
 *
 * Besides memory safety it checks what api.h and the API promise:
 *   - every answer is a status in 200..599, or a deferred submission with a spec;
 *   - every status >= 400 is a problem+json body that can be encoded (valid UTF-8), with
 *     a urn:ringmaster:problem: type, the same status and a non-empty detail;
 *   - 405 names in Allow only methods the path has, never the one refused;
 *   - a success names only what exists: an id segment of a 2xx is exactly one of the
 *     fixture's ids (nothing cut, folded or aliased), a job read is that job, a JSON
 *     body parses;
 *   - a stream describes the job of the path, a rank in [0, 65535], stdout, stderr or
 *     launcher and a non-negative position; GET /v1/events's, every job of the caller's;
 *   - stream and plain reads refuse the same parameters: logs with follow=1 and without,
 *     a job's events and every job's (/v1/events) with Accept: text/event-stream and
 *     without, both 400 or neither.
 * /v1/cluster, /v1/scheduler and POST /v1/jobs/{id}/resume are not sent: their handlers ask
 * the scheduler thread, which this harness does not run (the unit and integration tests
 * cover them). With no scheduler, the fixture has no active job (cancel and stop answer
 * 409 before they would ask it), and POST /v1/jobs is deferred (checked, not stored), as
 * ringd's HTTP server does. A request that changed the store (a non-GET 2xx) is followed
 * by a fresh copy of the fixture, so that every input meets the same state.
 */
#include <errno.h>
#include <ftw.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "api/api.h"
#include "fuzz.h"
#include "server/auth.h"

#define FIELDS_MAX 16

struct fake {
    const char *query[FIELDS_MAX][2];
    const char *header[FIELDS_MAX][2];
    int nquery, nheader;
    /* For the stream/plain comparison: replaces one key's value (NULL value: absent). */
    const char *force_key, *force_value;
};

static const char *lookup(const struct fake *f, const char *(*kv)[2], int n, const char *key)
{
    if (f->force_key != NULL && strcasecmp(f->force_key, key) == 0)
        return f->force_value;
    for (int i = 0; i < n; i++)
        if (strcasecmp(kv[i][0], key) == 0)
            return kv[i][1];
    return NULL;
}

static const char *fake_query(void *conn, const char *key)
{
    struct fake *f = conn;
    return lookup(f, f->query, f->nquery, key);
}

static const char *fake_header(void *conn, const char *key)
{
    struct fake *f = conn;
    return lookup(f, f->header, f->nheader, key);
}

/* ---- the fixture ---------------------------------------------------------------------- */

static char dir[] = "/tmp/ring-fuzz-routes-XXXXXX";
static char template_db[64], work_db[64], ckpt_prefix[96], me[64];
static char job_ids[3][32], token_id[16], bob_token_id[16];
static struct store *st;
static struct api_config cfg;

static _Noreturn void die(const char *what, const struct error *err)
{
    fprintf(stderr, "fuzz_routes: %s: %s\n", what, err ? err->text : strerror(errno));
    abort();
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
        die(path, NULL);
}

/* The first job's run directory: logs of rank 0 and progress, as a finished job leaves them
 * (DELETE removes them with the job, so each fresh copy writes them again). */
static void write_run_dir(char *run_dir, size_t len)
{
    char path[256];
    snprintf(run_dir, len, "%s/runs/%s/1", dir, job_ids[0]);
    snprintf(path, sizeof(path), "%s/runs", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/runs/%s", dir, job_ids[0]);
    mkdir(path, 0700);
    mkdir(run_dir, 0700);
    snprintf(path, sizeof(path), "%s/rank.0", run_dir);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/rank.0/stdout", run_dir);
    write_file(path, "step 1\nstep 2\nstep 3 \xc3\xa9\ndone\n");
    snprintf(path, sizeof(path), "%s/rank.0/stderr", run_dir);
    write_file(path, "");
    snprintf(path, sizeof(path), "%s/progress.json", run_dir);
    write_file(path, "{\"step\":3,\"total_steps\":3,\"samples_per_s\":10.5}");
}

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    size_t n;
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    if (in == NULL || out == NULL)
        die(to, NULL);
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            die(to, NULL);
    fclose(in);
    if (fclose(out) != 0)
        die(to, NULL);
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    remove(path); /* what cannot go stays behind in /tmp; the walk goes on */
    return 0;
}

/* At exit (the end of a fuzzing run or a replay): the fixture's directory goes. */
static void cleanup(void)
{
    store_close(st);
    st = NULL;
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh copy of the fixture's database as this harness's store. */
static void reset(void)
{
    struct error err;
    char path[96], run_dir[256];
    store_close(st);
    st = NULL;
    snprintf(path, sizeof(path), "%s-wal", work_db);
    unlink(path);
    snprintf(path, sizeof(path), "%s-shm", work_db);
    unlink(path);
    copy_file(template_db, work_db);
    if (store_open(work_db, &st, &err) < 0)
        die("store_open", &err);
    write_run_dir(run_dir, sizeof(run_dir));
}

/* The principals of alice's and bob's tokens; anyone else who calls is a stranger whose
 * principal owns nothing. */
static int64_t alice_p, bob_p;

static int64_t principal_named(const char *name)
{
    if (strcmp(name, "alice") == 0)
        return alice_p;
    return strcmp(name, "bob") == 0 ? bob_p : 1000000;
}

/* Jobs of alice (SUCCEEDED, with an attempt, logs and progress), bob (FAILED) and alice
 * (CANCELLED), and a token each of alice's and bob's, in the template database. */
static void fixture(void)
{
    static const char *const states[3][3] = {{"alice", "SUCCEEDED", "succeeded"},
                                             {"bob", "FAILED", "failed"},
                                             {"alice", "CANCELLED", "cancelled"}};
    struct passwd *pw = getpwuid(geteuid());
    struct store_sched sc = {0};
    struct error err;
    char run_dir[256], token[256], bob_token[256];
    struct store *t;

    if (mkdtemp(dir) == NULL)
        die("mkdtemp", NULL);
    atexit(cleanup);
    snprintf(template_db, sizeof(template_db), "%s/template.db", dir);
    snprintf(work_db, sizeof(work_db), "%s/ringd.db", dir);
    snprintf(ckpt_prefix, sizeof(ckpt_prefix), "%s/checkpoints/", dir);
    snprintf(me, sizeof(me), "%s", pw ? pw->pw_name : "root");
    if (auth_init() < 0 || store_open(template_db, &t, &err) < 0)
        die("store_open", &err);
    if (auth_token_create(t, "alice", 0, NULL, 0, token, &alice_p, &err) < 0 ||
        auth_token_create(t, "bob", 0, NULL, 0, bob_token, &bob_p, &err) < 0)
        die("auth_token_create", &err);
    snprintf(token_id, sizeof(token_id), "%.12s", token + 6);
    snprintf(bob_token_id, sizeof(bob_token_id), "%.12s", bob_token + 6);
    for (int i = 0; i < 3; i++) {
        json_t *spec = json_pack("{s:s, s:[s], s:{s:i, s:i}}", "name", "fixture", "command",
                                 "/bin/true", "workers", "min", 1, "max", 1);
        json_t *job;
        int created;
        if (spec == NULL || store_job_create(t, principal_named(states[i][0]), states[i][0], spec,
                                             NULL, "h", &job, &created, &err) < 0)
            die("store_job_create", &err);
        snprintf(job_ids[i], sizeof(job_ids[i]), "%s",
                 json_string_value(json_object_get(job, "id")));
        json_decref(job);
        json_decref(spec);
    }
    write_run_dir(run_dir, sizeof(run_dir));
    {
        struct store_attempt at = {.number = 1,
                                   .world_size = 1,
                                   .hosts = "localhost:1",
                                   .gpus = "",
                                   .backend_id = "1",
                                   .run_dir = run_dir};
        sc.attempts = 1;
        if (store_attempt_start(t, job_ids[0], &at, &sc, &err) < 0 ||
            store_attempt_progress(t, job_ids[0], 1, 2.0, 10.5, &err) < 0 ||
            store_attempt_end(t, job_ids[0], 1, 0, -1.0, "exit 0", "SUCCEEDED", "succeeded", &sc,
                              &err) < 0)
            die("attempt", &err);
    }
    for (int i = 1; i < 3; i++)
        if (store_job_transition(t, job_ids[i], states[i][1], states[i][2], "fixture", NULL, &err) <
            0)
            die("store_job_transition", &err);
    store_close(t);

    cfg.data_dir = dir;
    cfg.ckpt_prefix = ckpt_prefix;
    cfg.cluster = cluster_create(1, 4, 0); /* one node of 4 slots, kept to the end */
    cfg.backend = "local";
    if (cfg.cluster == NULL)
        die("cluster_create", NULL);
    cfg.token_create = auth_token_create;
    cfg.default_user = me;
    reset();
}

/* ---- the input ------------------------------------------------------------------------ */

/* Copies target into out with $1 $2 $3 $T replaced by the fixture's ids. */
static void substitute(const char *target, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = target; *p && o + 1 < len; p++) {
        const char *id = NULL;
        if (p[0] == '$' && p[1] >= '1' && p[1] <= '3')
            id = job_ids[p[1] - '1'];
        else if (p[0] == '$' && p[1] == 'T')
            id = token_id;
        if (id == NULL) {
            out[o++] = *p;
            continue;
        }
        for (; *id && o + 1 < len; id++)
            out[o++] = *id;
        p++;
    }
    out[o] = '\0';
}

/* The routes whose handlers ask the scheduler thread whatever the request holds. */
static int needs_scheduler(const char *path)
{
    size_t n = strlen(path);
    return !strcmp(path, "/v1/cluster") || !strcmp(path, "/v1/scheduler") ||
           (!strncmp(path, "/v1/jobs/", 9) && n > 7 && !strcmp(path + n - 7, "/resume"));
}

/* Splits "k=v&k=v" in place into f's query. */
static void split_query(char *q, struct fake *f)
{
    for (char *kv = strtok(q, "&"); kv != NULL && f->nquery < FIELDS_MAX; kv = strtok(NULL, "&")) {
        char *eq = strchr(kv, '=');
        if (eq != NULL)
            *eq = '\0';
        f->query[f->nquery][0] = kv;
        f->query[f->nquery][1] = eq ? eq + 1 : "";
        f->nquery++;
    }
}

/* The id segment of path for a route with one ("/v1/jobs/X...", "/v1/tokens/X"), in out;
 * 0 when the path has none. */
static int id_segment(const char *path, char *out, size_t len)
{
    const char *rest;
    size_t n;
    if (strncmp(path, "/v1/jobs/", 9) == 0)
        rest = path + 9;
    else if (strncmp(path, "/v1/tokens/", 11) == 0)
        rest = path + 11;
    else
        return 0;
    n = strcspn(rest, "/");
    if (n == 0 || n >= len)
        return 0;
    memcpy(out, rest, n);
    out[n] = '\0';
    return 1;
}

static int known_method(const char *m, size_t n)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", NULL};
    for (int i = 0; methods[i]; i++)
        if (strlen(methods[i]) == n && strncmp(methods[i], m, n) == 0)
            return 1;
    return 0;
}

static void release(struct api_response *r)
{
    api_response_release(r);
    memset(r, 0, sizeof(*r));
}

/* Handles the request; checks what every answer promises. s: where a submission defers. */
static void handle(struct api_request *req, struct api_submit *s, struct api_response *r)
{
    api_handle(&cfg, req, r);
    if (r->deferred) {
        FUZZ_CHECK(r->status == 0 && s->sub.spec != NULL && json_is_object(s->sub.spec));
        FUZZ_CHECK(strcmp(req->method, "POST") == 0 && strcmp(req->path, "/v1/jobs") == 0);
        json_decref(s->sub.spec);
        s->sub.spec = NULL;
        return;
    }
    FUZZ_CHECK(r->status >= 200 && r->status <= 599);
    if (r->status >= 400) {
        const char *type = json_string_value(json_object_get(r->body, "type"));
        const char *detail = json_string_value(json_object_get(r->body, "detail"));
        char *text = json_dumps(r->body, JSON_COMPACT);
        FUZZ_CHECK(r->problem && json_is_object(r->body));
        FUZZ_CHECK(text != NULL);
        free(text);
        FUZZ_CHECK(type != NULL && strncmp(type, "urn:ringmaster:problem:", 23) == 0);
        FUZZ_CHECK(json_integer_value(json_object_get(r->body, "status")) == r->status);
        FUZZ_CHECK(detail != NULL && *detail != '\0');
        FUZZ_CHECK(r->json_text == NULL && !r->file && r->stream == API_STREAM_NONE);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    struct fake f = {0};
    struct api_submit s;
    struct api_response r = {0};
    struct api_request req = {0};
    char *buf, *line, *end, *method, *target, *owner, *q, *body = NULL, seg[160];
    char path[8192];
    int changed;

    if (!ready) {
        fixture();
        ready = 1;
    }
    buf = malloc(size + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';

    /* The request line. */
    end = strchr(buf, '\n');
    if (end != NULL)
        *end = '\0';
    method = buf;
    target = strchr(method, ' ');
    if (target == NULL) {
        free(buf);
        return 0;
    }
    *target++ = '\0';
    owner = strchr(target, ' ');
    if (owner != NULL)
        *owner++ = '\0';
    q = strchr(target, '?');
    if (q != NULL)
        *q++ = '\0';
    substitute(target, path, sizeof(path));
    if (needs_scheduler(path)) { /* see the top */
        free(buf);
        return 0;
    }
    if (q != NULL)
        split_query(q, &f);

    /* Headers, then the body (its length from the input: it may hold NUL bytes). */
    for (line = end ? end + 1 : NULL; line != NULL;) {
        char *next = memchr(line, '\n', size - (size_t)(line - buf));
        char *colon;
        if (next != NULL)
            *next = '\0';
        if (*line == '\0') {
            body = next ? next + 1 : NULL;
            break;
        }
        colon = strchr(line, ':');
        if (colon != NULL && f.nheader < FIELDS_MAX) {
            *colon = '\0';
            f.header[f.nheader][0] = line;
            f.header[f.nheader][1] = colon[1] == ' ' ? colon + 2 : colon + 1;
            f.nheader++;
        }
        line = next ? next + 1 : NULL;
    }

    req.method = method;
    req.path = path;
    req.body = body;
    req.body_len = body ? size - (size_t)(body - buf) : 0;
    req.query = fake_query;
    req.header = fake_header;
    req.conn = &f;
    req.owner = owner && *owner ? owner : "admin";
    req.principal = principal_named(req.owner);
    req.admin = owner == NULL || *owner == '\0';
    req.store = st;
    req.defer = &s;
    memset(&s, 0, sizeof(s));

    handle(&req, &s, &r);

    if (r.status == 405) {
        const char *m = r.allow;
        FUZZ_CHECK(*m != '\0');
        while (*m) {
            size_t n = strcspn(m, ", ");
            FUZZ_CHECK(known_method(m, n));
            FUZZ_CHECK(strlen(method) != n || strncmp(method, m, n) != 0);
            m += n;
            m += strspn(m, ", ");
        }
    }
    if (r.status >= 200 && r.status < 300 && id_segment(path, seg, sizeof(seg))) {
        int known = strcmp(seg, token_id) == 0 || strcmp(seg, bob_token_id) == 0;
        for (int i = 0; i < 3; i++)
            known |= strcmp(seg, job_ids[i]) == 0;
        FUZZ_CHECK(known);
    }
    if (r.status >= 200 && r.status < 300 && r.json_text != NULL) {
        json_error_t jerr;
        json_t *got = json_loads(r.json_text, 0, &jerr);
        FUZZ_CHECK(got != NULL);
        if (strncmp(path, "/v1/jobs/", 9) == 0 && id_segment(path, seg, sizeof(seg)) &&
            strchr(path + 9, '/') == NULL)
            FUZZ_CHECK(strcmp(json_string_value(json_object_get(got, "id")), seg) == 0);
        json_decref(got);
    }
    if (r.stream == API_STREAM_ALL_EVENTS) { /* GET /v1/events: every job, the caller's scope */
        FUZZ_CHECK(r.status == 200 && r.stream_from >= 0 && r.stream_job[0] == '\0');
        FUZZ_CHECK(r.stream_owner == (req.admin ? STORE_ANYONE : req.principal));
    } else if (r.stream != API_STREAM_NONE) {
        FUZZ_CHECK(r.status == 200 && r.stream_from >= 0);
        FUZZ_CHECK(id_segment(path, seg, sizeof(seg)) && strcmp(seg, r.stream_job) == 0);
        if (r.stream == API_STREAM_LOGS)
            FUZZ_CHECK(r.stream_rank >= 0 && r.stream_rank <= 65535 &&
                       (!strcmp(r.stream_which, "stdout") || !strcmp(r.stream_which, "stderr") ||
                        !strcmp(r.stream_which, "launcher")));
    }
    changed = strcmp(method, "GET") != 0 && r.status >= 200 && r.status < 300;
    release(&r);

    /* The same parameters, streaming and not: both refused, or neither. */
    if (!changed && strcmp(method, "GET") == 0 &&
        (id_segment(path, seg, sizeof(seg)) || strcmp(path, "/v1/events") == 0)) {
        size_t pl = strlen(path);
        const char *key = NULL, *on = NULL;
        if (pl > 5 && strcmp(path + pl - 5, "/logs") == 0)
            key = "follow", on = "1";
        else if (pl > 7 && strcmp(path + pl - 7, "/events") == 0 &&
                 fake_header(&f, "Last-Event-ID") == NULL)
            key = "Accept", on = "text/event-stream";
        if (key != NULL) {
            int refused[2];
            for (int i = 0; i < 2; i++) {
                f.force_key = key;
                f.force_value = i ? on : NULL;
                handle(&req, &s, &r);
                refused[i] = r.status == 400;
                release(&r);
            }
            FUZZ_CHECK(refused[0] == refused[1]);
        }
    }
    if (changed)
        reset();
    free(buf);
    return 0;
}
