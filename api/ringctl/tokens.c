/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tokens.c - ringctl token create|list|revoke: ringd's bearer tokens (admins, or a user's
 * own).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/log.h"
#include "http.h"
#include "ringctl.h"

static int token_usage(void)
{
    fprintf(stderr, "usage: ringctl token create NAME [--admin] [--user UNIX_USER] "
                    "[--expires-in N[s|m|h|d] | --expires-at RFC3339] | "
                    "token list | "
                    "token revoke ID\n");
    return EXIT_USAGE;
}

/* "90", "90s", "15m", "12h", "30d" as seconds; -1 when s is none of these. The server
 * bounds the value. */
static long long duration_s(const char *s)
{
    char *end;
    long long v;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || v > 1000000000000LL)
        return -1;
    switch (*end) {
    case '\0':
    case 's':
        break;
    case 'm':
        v *= 60;
        break;
    case 'h':
        v *= 3600;
        break;
    case 'd':
        v *= 86400;
        break;
    default:
        return -1;
    }
    return *end == '\0' || end[1] == '\0' ? v : -1;
}

int ringctl_token(int argc, char **argv)
{
    json_t *t, *list, *tok;
    char *body, path[256];
    size_t i;
    int rc;

    if (argc >= 3 && !strcmp(argv[1], "create")) {
        int admin = 0;
        const char *user = NULL, *at = NULL;
        long long in = 0;
        for (int a = 3; a < argc; a++) {
            if (!strcmp(argv[a], "--admin")) {
                admin = 1;
            } else if (!strcmp(argv[a], "--user") && a + 1 < argc) {
                user = argv[++a];
            } else if (!strcmp(argv[a], "--expires-at") && a + 1 < argc) {
                at = argv[++a];
            } else if (!strcmp(argv[a], "--expires-in") && a + 1 < argc) {
                if ((in = duration_s(argv[++a])) <= 0) {
                    log_error("--expires-in '%s' must be a positive number of seconds, "
                              "or of minutes, hours or days with m, h or d (e.g. 30d)",
                              argv[a]);
                    return EXIT_USAGE;
                }
            } else {
                return token_usage();
            }
        }
        t = json_pack("{s:s, s:b}", "name", argv[2], "admin", admin);
        if (t != NULL && user != NULL)
            json_object_set_new(t, "user", json_string(user));
        if (t != NULL && in > 0)
            json_object_set_new(t, "expires_in", json_integer(in));
        if (t != NULL && at != NULL)
            json_object_set_new(t, "expires_at", json_string(at));
        body = json_dumps(t, JSON_COMPACT);
        json_decref(t);
        rc = ringctl__call("POST", "/v1/tokens", body, &t);
        free(body);
        if (rc != 0)
            return rc;
        if (ringctl__json_out())
            ringctl__print_json(t);
        else
            printf("%s\n", ringctl__str(t, "token")); /* the secret, shown this once */
        json_decref(t);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "list")) {
        if ((rc = ringctl__call("GET", "/v1/tokens", NULL, &t)) != 0)
            return rc;
        if (ringctl__json_out()) {
            ringctl__print_json(t);
            json_decref(t);
            return 0;
        }
        /* PRINCIPAL: who the token speaks for; two rows of one name may be two people. */
        printf("%-14s %-20s %-9s %-6s %-12s %-25s %-21s %s\n", "ID", "NAME", "PRINCIPAL", "ADMIN",
               "USER", "CREATED", "EXPIRES", "REVOKED");
        list = json_object_get(t, "tokens");
        json_array_foreach(list, i, tok)
        {
            printf("%-14s %-20.20s %-9lld %-6s %-12.12s %-25s %-21s %s\n", ringctl__str(tok, "id"),
                   ringctl__str(tok, "name"),
                   (long long)json_integer_value(json_object_get(tok, "principal")),
                   json_is_true(json_object_get(tok, "admin")) ? "yes" : "no",
                   json_object_get(tok, "user") ? ringctl__str(tok, "user") : "-",
                   ringctl__str(tok, "created_at"),
                   json_object_get(tok, "expires_at") ? ringctl__str(tok, "expires_at") : "never",
                   json_object_get(tok, "revoked_at") ? ringctl__str(tok, "revoked_at") : "-");
        }
        json_decref(t);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "revoke")) {
        char *e = curl_easy_escape(NULL, argv[2], 0);
        snprintf(path, sizeof(path), "/v1/tokens/%s", e ? e : "");
        curl_free(e);
        if ((rc = ringctl__call("DELETE", path, NULL, &t)) != 0)
            return rc;
        if (ringctl__json_out())
            ringctl__print_json(t);
        else
            printf("revoked %s (%s)\n", ringctl__str(t, "id"), ringctl__str(t, "name"));
        json_decref(t);
        return 0;
    }
    return token_usage();
}
