/* SPDX-License-Identifier: Apache-2.0 */
/* hosts.c - host lists and rank placement. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hosts.h"

/* Slots per host: well above any real node, low enough that np * slots never overflows. */
#define SLOTS_MAX 4096

static int name_ok(const char *s, size_t n)
{
    if (n == 0 || n > HOSTS_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '.' && c != '_')
            return 0;
    }
    return 1;
}

static int parse_slots(const char *s, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > SLOTS_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

static int add_host(struct hostlist *hl, const char *name, size_t n, int slots, struct error *err)
{
    struct host *grown;

    for (int i = 0; i < hl->count; i++) {
        if (strlen(hl->hosts[i].name) == n && memcmp(hl->hosts[i].name, name, n) == 0)
            return errno = EINVAL,
                   errprintf(err, "host '%.*s' is listed twice; give it once with its slots",
                             (int)n, name);
    }
    grown = realloc(hl->hosts, (size_t)(hl->count + 1) * sizeof(*grown));
    if (grown == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    hl->hosts = grown;
    memcpy(grown[hl->count].name, name, n);
    grown[hl->count].name[n] = '\0';
    grown[hl->count].slots = slots;
    grown[hl->count].max_slots = 0;
    hl->count++;
    return 0;
}

/* Parses one "host" or "host:slots" entry of length n. */
static int parse_entry(struct hostlist *hl, const char *e, size_t n, struct error *err)
{
    const char *colon = memchr(e, ':', n);
    size_t name_len = colon ? (size_t)(colon - e) : n;
    int slots = 1;

    if (!name_ok(e, name_len))
        return errno = EINVAL,
               errprintf(err, "bad host name '%.*s' (letters, digits, '-', '.', '_')", (int)n, e);
    if (colon != NULL) {
        char buf[16];
        size_t sl = n - name_len - 1;
        if (sl == 0 || sl >= sizeof(buf))
            return errno = EINVAL,
                   errprintf(err, "bad slot count in '%.*s' (want host:N with N in 1..%d)", (int)n,
                             e, SLOTS_MAX);
        memcpy(buf, colon + 1, sl);
        buf[sl] = '\0';
        if (parse_slots(buf, &slots) < 0)
            return errno = EINVAL,
                   errprintf(err, "bad slot count in '%.*s' (want host:N with N in 1..%d)", (int)n,
                             e, SLOTS_MAX);
    }
    return add_host(hl, e, name_len, slots, err);
}

/*
 * Parses one hostfile line "host slots=N max_slots=M" (s, blanks trimmed), Open MPI's form:
 * slots is how many ranks the host takes; max_slots the most it may take when oversubscribed,
 * at least slots. Either may be left out: slots defaults to max_slots when only that is given,
 * else to 1, and max_slots to none.
 */
static int parse_keys(struct hostlist *hl, char *s, struct error *err)
{
    static const char want[] = "want 'host slots=N', 'host max_slots=M' or both";
    size_t name_len = strcspn(s, " \t");
    int slots = 0, max = 0;
    char *w = s + name_len;

    if (!name_ok(s, name_len))
        return errno = EINVAL,
               errprintf(err, "bad host name '%.*s' (letters, digits, '-', '.', '_')",
                         (int)name_len, s);
    for (;;) {
        int *into, v;
        size_t n;
        w += strspn(w, " \t");
        if (*w == '\0')
            break;
        n = strcspn(w, " \t");
        if (w[n] != '\0')
            w[n++] = '\0';
        if (strncmp(w, "slots=", 6) == 0)
            into = &slots;
        else if (strncmp(w, "max_slots=", 10) == 0)
            into = &max;
        else
            return errno = EINVAL, errprintf(err, "unknown '%.40s' after host '%.*s' (%s)", w,
                                             (int)name_len, s, want);
        if (*into != 0)
            return errno = EINVAL, errprintf(err, "'%.*s' given twice for host '%.*s'",
                                             (int)(strchr(w, '=') - w), w, (int)name_len, s);
        if (parse_slots(strchr(w, '=') + 1, &v) < 0)
            return errno = EINVAL,
                   errprintf(err, "bad value in '%.40s' for host '%.*s' (want an integer in 1..%d)",
                             w, (int)name_len, s, SLOTS_MAX);
        *into = v;
        w += n;
    }
    if (slots == 0 && max == 0)
        return errno = EINVAL,
               errprintf(err, "nothing after host '%.*s' (%s)", (int)name_len, s, want);
    if (slots == 0)
        slots = max;
    if (max != 0 && max < slots)
        return errno = EINVAL, errprintf(err, "max_slots=%d is less than slots=%d for host '%.*s'",
                                         max, slots, (int)name_len, s);
    if (add_host(hl, s, name_len, slots, err) < 0)
        return -1;
    hl->hosts[hl->count - 1].max_slots = max;
    return 0;
}

int hosts_parse_list(struct hostlist *hl, const char *spec, struct error *err)
{
    const char *p = spec;

    if (spec == NULL || *spec == '\0')
        return errno = EINVAL, errprintf(err, "empty host list (want host:slots,host:slots,...)");
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 0)
            return errno = EINVAL, errprintf(err, "empty entry in host list '%s'", spec);
        if (parse_entry(hl, p, n, err) < 0)
            return -1;
        if (comma == NULL)
            return 0;
        p = comma + 1;
    }
}

int hosts_parse_file(struct hostlist *hl, const char *path, struct error *err)
{
    FILE *f = fopen(path, "r");
    int rc;

    if (f == NULL)
        return errprintf(err, "cannot open hostfile %s: %s", path, strerror(errno));
    rc = hosts_parse_stream(hl, f, path, err);
    fclose(f);
    return rc;
}

int hosts_parse_stream(struct hostlist *hl, FILE *f, const char *path, struct error *err)
{
    char line[512];
    int lineno = 0, rc = 0;

    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        char *s = line, *end;
        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            rc = (errno = EINVAL, errprintf(err, "%s:%d: line too long", path, lineno));
            break;
        }
        if ((end = strchr(s, '#')) != NULL)
            *end = '\0';
        while (isspace((unsigned char)*s))
            s++;
        end = s + strlen(s);
        while (end > s && isspace((unsigned char)end[-1]))
            *--end = '\0';
        if (*s == '\0')
            continue;
        if (strpbrk(s, " \t") != NULL) { /* "host key=N ...", as Open MPI writes it */
            struct error e2;
            if (parse_keys(hl, s, &e2) < 0)
                rc = errprintf(err, "%s:%d: %s", path, lineno, e2.text);
        } else {
            struct error e2;
            if (parse_entry(hl, s, strlen(s), &e2) < 0)
                rc = errprintf(err, "%s:%d: %s", path, lineno, e2.text);
        }
    }
    if (rc == 0 && hl->count == 0)
        return errno = EINVAL, errprintf(err, "hostfile %s lists no hosts", path);
    return rc;
}

int hosts_slots(const struct hostlist *hl)
{
    int n = 0;
    for (int i = 0; i < hl->count; i++)
        n += hl->hosts[i].slots;
    return n;
}

int hosts_place(const struct hostlist *hl, int np, struct placement *out, struct error *err)
{
    int total = hosts_slots(hl), rank = 0, used = 0, left = np, *n;

    if (np < 1)
        return errno = EINVAL, errprintf(err, "-np must be at least 1");
    if (np > total && !hl->oversubscribe)
        return errno = EINVAL,
               errprintf(err, "-np %d is more than the %d slots of the host list%s", np, total,
                         hl->count > 0 ? " (--oversubscribe allows more)" : "");
    if ((n = calloc((size_t)hl->count + 1, sizeof(*n))) == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    for (int h = 0; h < hl->count && left > 0; h++) {
        n[h] = hl->hosts[h].slots < left ? hl->hosts[h].slots : left;
        left -= n[h];
    }
    while (left > 0) { /* oversubscribed: one more rank per host in turn */
        int took = 0;
        for (int h = 0; h < hl->count && left > 0; h++) {
            if (hl->hosts[h].max_slots == 0 || n[h] < hl->hosts[h].max_slots) {
                n[h]++;
                left--;
                took = 1;
            }
        }
        if (!took) {
            free(n);
            return errno = EINVAL,
                   errprintf(err, "-np %d is more than the %d max_slots of the host list", np,
                             np - left);
        }
    }
    for (int h = 0; h < hl->count; h++) {
        for (int i = 0; i < n[h]; i++) {
            out[rank + i].host = h;
            out[rank + i].local_rank = i;
            out[rank + i].local_size = n[h];
            out[rank + i].cross_rank = used;
        }
        rank += n[h];
        used += n[h] > 0;
    }
    for (int r = 0; r < np; r++)
        out[r].cross_size = used;
    free(n);
    return 0;
}

int hosts_is_local(const char *name)
{
    char me[256];
    if (strcmp(name, "localhost") == 0 || strncmp(name, "127.", 4) == 0 || strcmp(name, "::1") == 0)
        return 1;
    if (gethostname(me, sizeof(me)) == 0) {
        me[sizeof(me) - 1] = '\0';
        if (strcmp(name, me) == 0)
            return 1;
    }
    return 0;
}

void hosts_free(struct hostlist *hl)
{
    free(hl->hosts);
    hl->hosts = NULL;
    hl->count = 0;
}
