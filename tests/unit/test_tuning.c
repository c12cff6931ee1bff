/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of libring's tuning table (worker/libring/src/tuning.c): the defaults, every
 * entry's range and its error message, the choices, the context-dependent defaults, a bad
 * value through ring_init, and the README's table against this one.
 *
 * `test_tuning --markdown` prints the README's rows instead (how they were written).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"
#include "unit.h"

static void unset_all(void)
{
    for (int k = 0; k < RING__K_COUNT; k++)
        unsetenv(ring__knobs[k].env);
}

START_TEST(table_is_complete_and_sane)
{
    int k;
    for (k = 0; ring__knobs[k].env != NULL; k++) {
        const struct ring__knob_def *d = &ring__knobs[k];
        ck_assert_msg(strncmp(d->env, "RING_", 5) == 0, "%s", d->env);
        ck_assert_msg(d->doc != NULL && *d->doc != '\0' && strchr(d->doc, '\n') == NULL &&
                          strchr(d->doc, '|') == NULL,
                      "%s: the doc is one line without '|'", d->env);
        ck_assert_msg(d->unit != NULL, "%s has no unit", d->env);
        if (d->choices != NULL) {
            long n = 0;
            while (d->choices[n] != NULL)
                n++;
            ck_assert_msg(d->dflt >= 0 && d->dflt < n, "%s: default out of its choices", d->env);
        } else {
            ck_assert_msg(d->min <= d->dflt && d->dflt <= d->max, "%s: default out of range",
                          d->env);
            if (d->ctx != RING__KC_NONE)
                ck_assert_msg(d->min <= d->dflt_alt && d->dflt_alt <= d->max, "%s", d->env);
        }
        for (int j = 0; j < k; j++)
            ck_assert_msg(strcmp(ring__knobs[j].env, d->env) != 0, "%s twice", d->env);
    }
    ck_assert_int_eq(k, RING__K_COUNT);
}
END_TEST

START_TEST(unset_gives_the_defaults)
{
    struct ring__tuning t, d;
    unset_all();
    memset(&t, 0xff, sizeof(t));
    ck_assert_int_eq(ring__tuning_load(&t), 0);
    ring__tuning_defaults(&d);
    for (int k = 0; k < RING__K_COUNT; k++) {
        ck_assert_msg(t.v[k] == ring__knobs[k].dflt, "%s", ring__knobs[k].env);
        ck_assert_int_eq(t.set[k], 0);
        ck_assert(d.v[k] == t.v[k]);
    }
    /* an empty value is unset */
    setenv("RING_SEGMENT_BYTES", "", 1);
    ck_assert_int_eq(ring__tuning_load(&t), 0);
    ck_assert_int_eq(t.v[RING__K_SEGMENT_BYTES], 256 * 1024);
}
END_TEST

START_TEST(values_are_read)
{
    struct ring__tuning t;
    unset_all();
    setenv("RING_FUSION_THRESHOLD", "8388608", 1);
    setenv("RING_CYCLE_TIME_MS", "5", 1);
    setenv("RING_SHM_CMA", "0", 1);
    setenv("RING_ALLREDUCE_ALGO", "RD", 1);
    setenv("RING_HIERARCHICAL", "1", 1);
    setenv("RING_COMPRESSION", "bf16", 1);
    ck_assert_int_eq(ring__tuning_load(&t), 0);
    ck_assert_int_eq(t.v[RING__K_FUSION_THRESHOLD], 8388608);
    ck_assert_int_eq(t.set[RING__K_FUSION_THRESHOLD], 1);
    ck_assert_int_eq(t.v[RING__K_CYCLE_TIME_MS], 5);
    ck_assert_int_eq(t.v[RING__K_SHM_CMA], 0);
    ck_assert_int_eq(t.v[RING__K_ALLREDUCE_ALGO], RING__ALGO_RD);
    ck_assert_int_eq(t.v[RING__K_HIERARCHICAL], RING__HIER_ON);
    ck_assert_int_eq(t.v[RING__K_COMPRESSION], 2);
    ck_assert_int_eq(t.set[RING__K_SEGMENT_BYTES], 0);
    setenv("RING_HIERARCHICAL", "AUTO", 1);
    ck_assert_int_eq(ring__tuning_load(&t), 0);
    ck_assert_int_eq(t.v[RING__K_HIERARCHICAL], RING__HIER_AUTO);
    setenv("RING_HIERARCHICAL", "0", 1);
    ck_assert_int_eq(ring__tuning_load(&t), 0);
    ck_assert_int_eq(t.v[RING__K_HIERARCHICAL], RING__HIER_OFF);
}
END_TEST

/* Every integer entry: just below min, just above max and garbage each fail, naming the
 * variable and the range; min and max themselves pass. */
START_TEST(every_bad_integer_is_refused)
{
    struct ring__tuning t;
    char val[64], range[96];
    for (int k = 0; k < RING__K_COUNT; k++) {
        const struct ring__knob_def *d = &ring__knobs[k];
        const char *bad[3];
        char below[32], above[32];
        if (d->choices != NULL)
            continue;
        unset_all();
        snprintf(below, sizeof(below), "%ld", d->min - 1);
        snprintf(above, sizeof(above), "%ld", d->max + 1);
        bad[0] = below;
        bad[1] = above;
        bad[2] = "12abc";
        snprintf(range, sizeof(range), "[%ld, %ld]", d->min, d->max);
        for (int i = 0; i < 3; i++) {
            setenv(d->env, bad[i], 1);
            ck_assert_msg(ring__tuning_load(&t) == RING_EENV, "%s=%s", d->env, bad[i]);
            ck_assert_msg(strstr(ring_last_error(), d->env) != NULL, "%s", ring_last_error());
            ck_assert_msg(strstr(ring_last_error(), range) != NULL, "%s", ring_last_error());
        }
        snprintf(val, sizeof(val), "%ld", d->min);
        setenv(d->env, val, 1);
        ck_assert_int_eq(ring__tuning_load(&t), 0);
        ck_assert(t.v[k] == d->min);
        snprintf(val, sizeof(val), "%ld", d->max);
        setenv(d->env, val, 1);
        ck_assert_int_eq(ring__tuning_load(&t), 0);
        ck_assert(t.v[k] == d->max);
    }
}
END_TEST

START_TEST(bad_choices_list_the_choices)
{
    struct ring__tuning t;
    static const char *const cases[][3] = {
        {"RING_ALLREDUCE_ALGO", "fastest",
         "RING_ALLREDUCE_ALGO='fastest' must be auto, ring, rd or rhd"},
        {"RING_HIERARCHICAL", "yes", "RING_HIERARCHICAL='yes' must be 0, auto or 1"},
        {"RING_COMPRESSION", "fp8", "RING_COMPRESSION='fp8' must be none, fp16 or bf16"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unset_all();
        setenv(cases[i][0], cases[i][1], 1);
        ck_assert_int_eq(ring__tuning_load(&t), RING_EENV);
        ck_assert_str_eq(ring_last_error(), cases[i][2]);
    }
}
END_TEST

START_TEST(spin_default_follows_oversubscription)
{
    struct ring__tuning t;
    unset_all();
    ck_assert_int_eq(ring__tuning_load(&t), 0);
    ring__tuning_resolve(&t, 0);
    ck_assert_int_eq(t.v[RING__K_SPIN_US], 50);
    ring__tuning_resolve(&t, 1);
    ck_assert_int_eq(t.v[RING__K_SPIN_US], 100);
    setenv("RING_SPIN_US", "7", 1);
    ck_assert_int_eq(ring__tuning_load(&t), 0);
    ring__tuning_resolve(&t, 1);
    ck_assert_int_eq(t.v[RING__K_SPIN_US], 7); /* what the user set wins */
}
END_TEST

/* Through the public API: a bad knob fails ring_init before anything starts. */
START_TEST(ring_init_refuses_a_bad_knob)
{
    static const char *const cases[][2] = {
        {"RING_FUSION_THRESHOLD", "-1"},
        {"RING_CYCLE_TIME_MS", "soon"},
        {"RING_SPIN_US", "2000000"},
        {"RING_SHM_RING_BYTES", "100"},
        {"RING_SOCKET_BUFFER_BYTES", "x"},
        {"RING_CACHE_CAPACITY", "2000000"},
        {"RING_AUTOTUNE", "2"},
        {"RING_COMPRESSION", "fp8"},
    };
    unset_all();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv(cases[i][0], cases[i][1], 1);
        ck_assert_int_eq(ring_init(), RING_EENV);
        ck_assert_msg(strstr(ring_last_error(), cases[i][0]) != NULL, "%s", ring_last_error());
        ck_assert_int_eq(ring_initialized(), 0);
        unsetenv(cases[i][0]);
    }
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_finalize(), 0);
}
END_TEST

/* The README's table of tuning variables holds exactly this table's rows. */
START_TEST(readme_matches_the_table)
{
    FILE *f = fopen(RING_README, "r");
    char *text, row[2048];
    long n;
    int rows = 0;

    ck_assert_msg(f != NULL, "cannot open %s", RING_README);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = malloc((size_t)n + 1);
    ck_assert(text != NULL);
    ck_assert_int_eq(fread(text, 1, (size_t)n, f), n);
    text[n] = '\0';
    fclose(f);
    for (int k = 0; k < RING__K_COUNT; k++) {
        char name[96];
        const char *p;
        ring__tuning_markdown_row(k, row, sizeof(row));
        ck_assert_msg(strstr(text, row) != NULL,
                      "README.md lacks (or has another) row for %s; it should read:\n%s\n"
                      "(test_tuning --markdown prints them all)",
                      ring__knobs[k].env, row);
        /* and no other row of another table documents it differently */
        snprintf(name, sizeof(name), "| `%s` |", ring__knobs[k].env);
        p = strstr(text, name);
        ck_assert(p != NULL && strstr(p + 1, name) == NULL);
        rows++;
    }
    ck_assert_int_eq(rows, RING__K_COUNT);
    free(text);
}
END_TEST

int main(int argc, char **argv)
{
    const TTest *const tests[] = {
        table_is_complete_and_sane,
        unset_gives_the_defaults,
        values_are_read,
        every_bad_integer_is_refused,
        bad_choices_list_the_choices,
        spin_default_follows_oversubscription,
        ring_init_refuses_a_bad_knob,
        readme_matches_the_table,
        NULL,
    };
    if (argc > 1 && strcmp(argv[1], "--markdown") == 0) {
        char row[2048];
        printf("| variable | default | range | unit | meaning |\n|---|---|---|---|---|\n");
        for (int k = 0; k < RING__K_COUNT; k++) {
            ring__tuning_markdown_row(k, row, sizeof(row));
            printf("%s\n", row);
        }
        return 0;
    }
    return unit_main("tuning", tests, 30);
}
