/* SPDX-License-Identifier: Apache-2.0 */
/* spec_yaml.c - a YAML document as JSON through libyaml's document API (see spec_yaml.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "spec_yaml.h"

/* Nesting deeper than this is refused: it bounds the recursion (and alias cycles). */
#define DEPTH_MAX 64

struct conv {
    yaml_document_t *doc;
    const char *path;
    char *err;
    size_t errlen;
};

static json_t *fail(struct conv *c, const yaml_node_t *n, const char *what)
{
    snprintf(c->err, c->errlen, "%s:%lu:%lu: %s", c->path, (unsigned long)n->start_mark.line + 1,
             (unsigned long)n->start_mark.column + 1, what);
    return NULL;
}

static int is(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(s, *words) == 0)
            return 1;
    return 0;
}

/* A plain scalar typed by the core schema. */
static json_t *plain(struct conv *c, const yaml_node_t *n, const char *s)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    static const char *const infs[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL};
    static const char *const ninfs[] = {"-.inf", "-.Inf", "-.INF", NULL};
    static const char *const nans[] = {".nan", ".NaN", ".NAN", NULL};
    const char *digits = s + (*s == '-' || *s == '+');
    char *end;

    if (is(s, nulls))
        return json_null();
    if (is(s, trues) || is(s, falses))
        return json_boolean(is(s, trues));
    if (is(s, infs) || is(s, ninfs) || is(s, nans))
        return fail(c, n, "infinities and NaN cannot be sent as JSON");
    if ((*digits >= '0' && *digits <= '9') ||
        (*digits == '.' && digits[1] >= '0' && digits[1] <= '9')) {
        long long v;
        int base = 10;
        if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'o') && digits == s)
            base = digits[1] == 'x' ? 16 : 8;
        errno = 0;
        v = strtoll(base == 10 ? s : s + 2, &end, base);
        if (*end == '\0' && end != s) {
            if (errno == ERANGE)
                return fail(c, n, "integer out of range");
            return json_integer(v);
        }
        if (base == 10) {
            double d = strtod(s, &end);
            if (*end == '\0' && strspn(digits, "0123456789.eE+-") == strlen(digits))
                return isfinite(d) ? json_real(d) : fail(c, n, "number out of range");
        }
    }
    return json_string(s);
}

static json_t *convert(struct conv *c, yaml_node_t *n, int depth)
{
    json_t *out;

    if (depth > DEPTH_MAX)
        return fail(c, n, "nested too deeply (or an alias refers to itself)");
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        const char *s = (const char *)n->data.scalar.value;
        if (strlen(s) != n->data.scalar.length)
            return fail(c, n, "a string holds a NUL character");
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
            return plain(c, n, s);
        out = json_string(s);
        return out ? out : fail(c, n, "a string is not valid UTF-8");
    }
    case YAML_SEQUENCE_NODE:
        out = json_array();
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top;
             i++) {
            json_t *v = convert(c, yaml_document_get_node(c->doc, *i), depth + 1);
            if (v == NULL || json_array_append_new(out, v) < 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    case YAML_MAPPING_NODE:
        out = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
            const char *key;
            json_t *v;
            if (k->type != YAML_SCALAR_NODE) {
                json_decref(out);
                return fail(c, k, "a mapping key must be a plain string");
            }
            key = (const char *)k->data.scalar.value;
            if (json_object_get(out, key) != NULL) {
                char what[200];
                snprintf(what, sizeof(what), "duplicate key '%.100s'", key);
                json_decref(out);
                return fail(c, k, what);
            }
            v = convert(c, yaml_document_get_node(c->doc, p->value), depth + 1);
            if (v == NULL || json_object_set_new(out, key, v) < 0) {
                json_decref(out);
                return v == NULL ? NULL : fail(c, k, "a key is not valid UTF-8");
            }
        }
        return out;
    default:
        return fail(c, n, "an empty node");
    }
}

/* The first document from an initialized parser, named name in messages. */
static json_t *load(yaml_parser_t *parser, const char *name, char *err, size_t errlen)
{
    yaml_document_t doc;
    yaml_node_t *root;
    json_t *out = NULL;
    struct conv c = {&doc, name, err, errlen};

    if (!yaml_parser_load(parser, &doc)) {
        snprintf(err, errlen, "%s:%lu:%lu: %s%s%s", name,
                 (unsigned long)parser->problem_mark.line + 1,
                 (unsigned long)parser->problem_mark.column + 1,
                 parser->problem ? parser->problem : "not YAML", parser->context ? " " : "",
                 parser->context ? parser->context : "");
        return NULL;
    }
    root = yaml_document_get_root_node(&doc);
    if (root == NULL)
        snprintf(err, errlen, "%s: the file holds no YAML document", name);
    else
        out = convert(&c, root, 0);
    yaml_document_delete(&doc);
    return out;
}

json_t *spec_yaml_load_file(const char *path, char *err, size_t errlen)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    yaml_parser_t parser;
    json_t *out;

    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    out = load(&parser, path, err, errlen);
    yaml_parser_delete(&parser);
    if (f != stdin)
        fclose(f);
    return out;
}

json_t *spec_yaml_load_string(const char *text, size_t len, const char *name, char *err,
                              size_t errlen)
{
    yaml_parser_t parser;
    json_t *out;

    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    out = load(&parser, name, err, errlen);
    yaml_parser_delete(&parser);
    return out;
}
