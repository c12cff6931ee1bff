/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_hosts - ringrun's host lists (-H) and hostfiles (worker/ringrun/hosts.c) on any
 * bytes; the first byte picks which, and the -np to place. It checks:
 *   - a refusal has a message;
 *   - an accepted list holds only well-formed hosts: names of 1..255 letters, digits, '-',
 *     '.' and '_', each named once, with 1..4096 slots;
 *   - placing np ranks fills hosts in order, each rank's local and cross ranks within
 *     their sizes, or refuses when np is above the slots.
 */
#include <ctype.h>
#include <string.h>

#include "fuzz.h"
#include "hosts.h"

static void check_list(const struct hostlist *hl)
{
    for (int i = 0; i < hl->count; i++) {
        const char *n = hl->hosts[i].name;
        FUZZ_CHECK(strlen(n) >= 1 && strlen(n) <= HOSTS_NAME_MAX);
        for (const char *c = n; *c; c++)
            FUZZ_CHECK(isalnum((unsigned char)*c) || *c == '-' || *c == '.' || *c == '_');
        FUZZ_CHECK(hl->hosts[i].slots >= 1 && hl->hosts[i].slots <= 4096);
        for (int j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(hl->hosts[j].name, n) != 0);
    }
}

static void check_place(const struct hostlist *hl, int np)
{
    struct placement *pl = calloc((size_t)np, sizeof(*pl));
    struct error err = {{0}};
    int slots = hosts_slots(hl);

    FUZZ_CHECK(pl != NULL);
    if (hosts_place(hl, np, pl, &err) < 0) {
        FUZZ_CHECK(np > slots && err.text[0] != '\0');
    } else {
        FUZZ_CHECK(np <= slots);
        for (int r = 0; r < np; r++) {
            FUZZ_CHECK(pl[r].host >= 0 && pl[r].host < hl->count);
            FUZZ_CHECK(r == 0 || pl[r].host >= pl[r - 1].host); /* in order */
            FUZZ_CHECK(pl[r].local_rank >= 0 && pl[r].local_rank < pl[r].local_size);
            FUZZ_CHECK(pl[r].local_size <= hl->hosts[pl[r].host].slots);
            FUZZ_CHECK(pl[r].cross_rank >= 0 && pl[r].cross_rank < pl[r].cross_size);
        }
    }
    free(pl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hostlist hl = {0};
    struct error err = {{0}};
    int rc;

    if (size < 2)
        return 0;
    if (data[0] & 1) {
        FILE *f = fmemopen((void *)(data + 2), size - 2, "r");
        if (f == NULL) /* fmemopen refuses an empty buffer */
            return 0;
        rc = hosts_parse_stream(&hl, f, "hostfile", &err);
        fclose(f);
    } else {
        char *s = malloc(size - 1);
        FUZZ_CHECK(s != NULL);
        memcpy(s, data + 2, size - 2);
        s[size - 2] = '\0';
        rc = hosts_parse_list(&hl, s, &err);
        free(s);
    }
    if (rc < 0) {
        FUZZ_CHECK(err.text[0] != '\0');
    } else {
        FUZZ_CHECK(hl.count > 0);
        check_list(&hl);
        check_place(&hl, 1 + data[1]);
    }
    hosts_free(&hl);
    return 0;
}
