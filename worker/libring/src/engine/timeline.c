/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timeline.c - a Chrome trace ("JSON array format") of what the engine did, as Horovod's
 * timeline: one row ("pid") per tensor, named by a metadata event, with duration events
 * for its phases and instant marks as ranks become ready.
 *
 * Validity on disk: events are buffered; a flush writes them followed by "\n]\n", then
 * moves the file position back over that tail, so the next flush overwrites it. Between
 * flushes the file is always a complete JSON array; a crash can lose only the events since
 * the last flush (one per engine cycle).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"

struct ring__timeline {
    FILE *f;
    struct ring__strmap ids; /* tensor name -> pid */
    int next_id;
    int first; /* no event written yet */
    struct ring__buf pending;
};

struct ring__timeline *ring__timeline_open(const char *path)
{
    struct ring__timeline *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->f = fopen(path, "w");
    if (t->f == NULL) {
        int e = errno;
        free(t);
        errno = e;
        return NULL;
    }
    t->first = 1;
    t->next_id = 1;
    fputs("[\n", t->f);
    ring__timeline_flush(t);
    return t;
}

/* Appends one event object (text without the separator). */
static void event(struct ring__timeline *t, const char *json)
{
    size_t n = strlen(json);
    const char *sep = t->first ? "" : ",\n";
    size_t need = strlen(sep) + n;
    char *grown;

    if (t->pending.oom)
        return;
    if (t->pending.len + need > t->pending.cap) {
        size_t cap = t->pending.cap ? t->pending.cap * 2 : 4096;
        while (cap < t->pending.len + need)
            cap *= 2;
        grown = realloc(t->pending.data, cap);
        if (grown == NULL) {
            t->pending.oom = 1;
            return;
        }
        t->pending.data = grown;
        t->pending.cap = cap;
    }
    memcpy(t->pending.data + t->pending.len, sep, strlen(sep));
    t->pending.len += strlen(sep);
    memcpy(t->pending.data + t->pending.len, json, n);
    t->pending.len += n;
    t->first = 0;
}

/* JSON-escapes s into out (tensor names are printable, but quotes and backslashes may occur). */
static void escape(const char *s, char *out, size_t len)
{
    size_t o = 0;
    for (; *s && o + 7 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, len - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

static int tensor_id(struct ring__timeline *t, const char *name)
{
    intptr_t id = (intptr_t)ring__strmap_get(&t->ids, name);
    char json[1024], esc[600];

    if (id > 0)
        return (int)id;
    id = t->next_id++;
    if (ring__strmap_put(&t->ids, name, (void *)id) < 0)
        return 0;
    escape(name, esc, sizeof(esc));
    snprintf(json, sizeof(json),
             "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s\"}}",
             (int)id, esc);
    event(t, json);
    snprintf(
        json, sizeof(json),
        "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
        (int)id, (int)id);
    event(t, json);
    return (int)id;
}

void ring__timeline_phase(struct ring__timeline *t, const char *name, const char *phase, int begin,
                          int64_t us, const char *args)
{
    char json[1024];
    int id;
    if (t == NULL)
        return;
    id = tensor_id(t, name);
    snprintf(json, sizeof(json),
             "{\"name\":\"%s\",\"ph\":\"%s\",\"ts\":%lld,\"pid\":%d,\"tid\":1%s%s%s}", phase,
             begin ? "B" : "E", (long long)us, id, args ? ",\"args\":{" : "", args ? args : "",
             args ? "}" : "");
    event(t, json);
}

void ring__timeline_mark(struct ring__timeline *t, const char *name, const char *what, int64_t us)
{
    char json[512];
    int id;
    if (t == NULL)
        return;
    id = tensor_id(t, name);
    snprintf(json, sizeof(json),
             "{\"name\":\"%s\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%lld,\"pid\":%d,\"tid\":1}", what,
             (long long)us, id);
    event(t, json);
}

void ring__timeline_instant(struct ring__timeline *t, const char *name, const char *what,
                            int64_t us, const char *args)
{
    char json[768];
    int id;
    if (t == NULL)
        return;
    id = tensor_id(t, name);
    snprintf(json, sizeof(json),
             "{\"name\":\"%s\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%lld,\"pid\":%d,\"tid\":1,"
             "\"args\":{%s}}",
             what, (long long)us, id, args);
    event(t, json);
}

void ring__timeline_flush(struct ring__timeline *t)
{
    static const char tail[] = "\n]\n";
    if (t == NULL || t->f == NULL)
        return;
    if (t->pending.len > 0 && !t->pending.oom)
        fwrite(t->pending.data, 1, t->pending.len, t->f);
    t->pending.len = 0;
    t->pending.oom = 0;
    fwrite(tail, 1, sizeof(tail) - 1, t->f);
    fflush(t->f);
    /* The next events overwrite the tail. */
    fseek(t->f, -(long)(sizeof(tail) - 1), SEEK_CUR);
}

void ring__timeline_close(struct ring__timeline *t)
{
    if (t == NULL)
        return;
    ring__timeline_flush(t);
    fclose(t->f);
    ring__strmap_free(&t->ids);
    ring__buf_free(&t->pending);
    free(t);
}
