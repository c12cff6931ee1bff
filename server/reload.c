/* SPDX-License-Identifier: Apache-2.0 */
/* reload.c - SIGHUP: the configuration, the TLS pair and the runtime settings (reload.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "notify.h"
#include "reload.h"

struct reload {
    int argc;
    char **argv;
    const char *path;     /* --config's file, or NULL */
    struct config loaded; /* as last loaded, with what a reload applied */
    struct http *http;
    struct scheduler *sched;
};

/* What one reload did, for its log line: "tls ...; streams_per_token 32 -> 8". */
struct done {
    char text[1536];
    int n;
};

static void done_add(struct done *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void done_add(struct done *d, const char *fmt, ...)
{
    size_t at = strlen(d->text);
    va_list ap;
    if (at + 3 >= sizeof(d->text))
        return;
    if (d->n++ > 0)
        at += (size_t)snprintf(d->text + at, sizeof(d->text) - at, "; ");
    va_start(ap, fmt);
    vsnprintf(d->text + at, sizeof(d->text) - at, fmt, ap);
    va_end(ap);
}

struct reload *reload_create(int argc, char **argv, const struct config *loaded, struct http *http,
                             struct scheduler *sched)
{
    struct reload *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->argc = argc;
    r->argv = argv;
    r->loaded = *loaded;
    r->http = http;
    r->sched = sched;
    /* As config_load finds it: the file is read whatever the flags' order. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            r->path = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9))
            r->path = argv[i] + 9;
    }
    return r;
}

void reload_destroy(struct reload *r)
{
    free(r);
}

/* c as config_print writes it, in a string to free; NULL when out of memory. */
static char *render(const struct config *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    config_print(c, f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The line after line in text, or NULL after the last. */
static const char *next_line(const char *line)
{
    const char *nl = strchr(line, '\n');
    return nl != NULL && nl[1] != '\0' ? nl + 1 : NULL;
}

/* The value of key in rendered text into out ("" when absent). */
static void value_of(const char *text, const char *key, char *out, size_t len)
{
    size_t kl = strlen(key);
    out[0] = '\0';
    for (const char *line = text; line != NULL; line = next_line(line)) {
        if (strncmp(line, key, kl) == 0 && strncmp(line + kl, " = ", 3) == 0) {
            size_t vl = strcspn(line + kl + 3, "\n");
            snprintf(out, len, "%.*s", (int)vl, line + kl + 3);
            return;
        }
    }
}

/* The pair again, from next's paths. Both ends must serve TLS: the server was started
 * with or without it, and that is fixed until a restart. */
static void reload_tls(struct reload *r, const struct config *next, struct done *d)
{
    struct tls_info info;
    struct error err;
    char until[32] = "?";
    int had = r->loaded.tls_cert[0] != '\0', has = next->tls_cert[0] != '\0';

    if (!had && !has)
        return;
    if (had != has) {
        log_warning("reload: TLS cannot be turned %s without a restart; kept %s",
                    has ? "on" : "off", had ? "HTTPS" : "plain HTTP");
        return;
    }
    if (http_tls_reload(r->http, next->tls_cert, next->tls_key, &info, &err) < 0) {
        log_error("reload: %s; kept the TLS certificate in use (%s)", err.text, r->loaded.tls_cert);
        return;
    }
    {
        time_t t = (time_t)info.not_after;
        struct tm tm;
        if (gmtime_r(&t, &tm) != NULL)
            strftime(until, sizeof(until), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    done_add(d, "TLS certificate %s (%s, %u in the chain, SHA-256 %s, valid until %s)",
             next->tls_cert, info.subject, info.chain, info.fingerprint, until);
    snprintf(r->loaded.tls_cert, sizeof(r->loaded.tls_cert), "%s", next->tls_cert);
    snprintf(r->loaded.tls_key, sizeof(r->loaded.tls_key), "%s", next->tls_key);
}

/* One setting that changed from was to now: applied when it can change at runtime, else
 * reported as kept. */
static void reload_setting(struct reload *r, const struct config *next, const char *key,
                           const char *was, const char *now, struct done *d)
{
    struct error err;
    if (!strcmp(key, "tls_cert") || !strcmp(key, "tls_key"))
        return; /* reload_tls */
    if (!strcmp(key, "streams_per_token")) {
        http_set_streams_per_token(r->http, next->streams_per_token);
        r->loaded.streams_per_token = next->streams_per_token;
        done_add(d, "streams_per_token %s -> %s", was, now);
    } else if (!strcmp(key, "policy")) {
        if (scheduler_set_policy(r->sched, next->policy, NULL, &err) < 0) {
            log_error("reload: cannot switch the policy to %s: %s; kept %s", now, err.text, was);
            return;
        }
        snprintf(r->loaded.policy, sizeof(r->loaded.policy), "%s", next->policy);
        done_add(d, "policy %s -> %s", was, now);
    } else {
        log_warning("reload: %s cannot change without a restart; kept %s", key,
                    was[0] ? was : "(none)");
    }
}

/* Compares next with what runs, key by key, through config_print: every key ringd has,
 * its backends' and policies' included, without a list here to keep up to date. */
static int reload_settings(struct reload *r, const struct config *next, struct done *d)
{
    char *old = render(&r->loaded), *new = render(next);
    char was[2100], now[2100];
    int rc = -1;

    if (old == NULL || new == NULL)
        goto error;
    for (const char *line = new; line != NULL; line = next_line(line)) {
        size_t kl = strcspn(line, " \n");
        char key[128];
        if (strncmp(line + kl, " = ", 3) == 0 && kl < sizeof(key)) {
            snprintf(key, sizeof(key), "%.*s", (int)kl, line);
            value_of(old, key, was, sizeof(was));
            value_of(new, key, now, sizeof(now));
            if (strcmp(was, now) != 0)
                reload_setting(r, next, key, was, now, d);
        }
    }
    rc = 0;
error:
    free(old);
    free(new);
    return rc;
}

void reload_run(struct reload *r)
{
    struct config *next;
    struct done d = {.text = "", .n = 0};
    struct error err;
    int rc;

    if (r == NULL) {
        log_error("reload: SIGHUP, but ringd had no memory to prepare reloads at start; "
                  "restart it to change its configuration");
        return;
    }
    next = malloc(sizeof(*next));
    notify_reloading();
    log_info("reload: SIGHUP; reading %s", r->path ? r->path : "the flags (no --config file)");
    if (next == NULL) {
        log_error("reload: out of memory; nothing was reloaded");
        goto out;
    }
    /* config_load parses argv with getopt_long, whose place is kept in globals: glibc
     * starts over at optind 0. */
    optind = 0;
    rc = config_load(next, r->argc, r->argv, &err);
    if (rc != 0) {
        log_error("reload: %s; nothing was reloaded, the running configuration stays",
                  rc < 0 ? err.text : "the flags ask to print and exit");
        goto out;
    }
    reload_tls(r, next, &d);
    if (reload_settings(r, next, &d) < 0)
        log_error("reload: out of memory comparing the settings; only TLS was reloaded");
    if (d.n > 0)
        log_info("reload: done: %s", d.text);
    else
        log_info("reload: done: no setting that changes at runtime changed");
out:
    free(next);
    notify_ready("serving (reloaded)");
}
