/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the JobSpec codec: defaults, every validation rule and its field path. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "api/jobspec.h"
#include "unit.h"

/* Parses text; on failure returns the first error's field and detail joined by ": ". */
static int parse(const char *text, json_t **spec, char *why, size_t len)
{
    json_t *errors;
    int status;
    const char *kind;
    struct cluster *c = cluster_create(1, 8, 4);
    struct jobspec_limits lim = {c, "local"};
    int rc = jobspec_parse(text, strlen(text), &lim, spec, &errors, &status, &kind);
    cluster_free(c);
    if (rc < 0) {
        json_t *e = json_array_get(errors, 0);
        snprintf(why, len, "%d %s %s: %s", status, kind,
                 json_string_value(json_object_get(e, "field")),
                 json_string_value(json_object_get(e, "detail")));
        json_decref(errors);
    }
    return rc;
}

START_TEST(defaults_are_filled_in)
{
    json_t *spec;
    char why[512];
    ck_assert_int_eq(parse("{\"name\":\"a\",\"command\":[\"train\"]}", &spec, why, sizeof(why)), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(spec, "workers"), "min")),
                     1);
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "gpus_per_worker")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(spec, "backend")), "local");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "launcher")), "ringrun");
    ck_assert(json_is_object(json_object_get(spec, "env")));
    json_decref(spec);
    ck_assert_int_eq(parse("{\"name\":\"a\",\"command\":[\"t\"],\"workers\":{\"min\":2,\"max\":8},"
                           "\"gpus_per_worker\":2}",
                           &spec, why, sizeof(why)),
                     0);
    json_decref(spec);
}
END_TEST

START_TEST(every_rule_names_its_field)
{
    static const char *const cases[][2] = {
        {"{\"name\":\"a\",\"command\":[\"t\"]", "400 malformed-json"},
        {"{\"name\":\"a\",\"name\":\"b\",\"command\":[\"t\"]}", "400 malformed-json"},
        {"\"just a string\"", "400 malformed-json"},
        {"[1]", "400 malformed-json : the body must be a JSON object (a JobSpec), not an array"},
        {"{\"command\":[\"t\"]}", "name: name is required"},
        {"{\"name\":\"a b\",\"command\":[\"t\"]}", "name: name may only use"},
        {"{\"name\":\"a\"}", "command: command is required"},
        {"{\"name\":\"a\",\"command\":\"t\"}", "command: command must be an array"},
        {"{\"name\":\"a\",\"command\":[\"\"]}", "command[0]: command[0], the program"},
        {"{\"name\":\"a\",\"command\":[\"t\",3]}", "command[1]: command[1] must be a string"},
        /* a job starts in its new, empty run directory: ./train could never be found there */
        {"{\"name\":\"a\",\"command\":[\"./train\"]}",
         "command[0]: command[0] './train' is relative to working_dir, which is not set"},
        {"{\"name\":\"a\",\"command\":[\"build/train\"]}", "command[0]: command[0] 'build/train'"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"workers\":0}", "workers: workers must be in"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"workers\":{\"min\":2}}", "workers.max:"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"workers\":{\"min\":2,\"max\":1}}",
         "workers.max: workers.max must be >= workers.min (2), not 1"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"workers\":{\"min\":1,\"max\":2,\"x\":1}}",
         "workers.x: unknown field"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"workers\":9}",
         "needs 9 workers of 1 slots each (workers.min x cpus_per_worker) but this cluster fits 8"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"workers\":3,\"gpus_per_worker\":2}",
         "needs 3 workers of 2 GPUs and 1 slots each"},
        /* cpus_per_worker counts: 3 workers of 3 slots need 9 of the 8 */
        {"{\"name\":\"a\",\"command\":[\"t\"],\"workers\":3,\"cpus_per_worker\":3}",
         "cluster fits 2"},
        /* no Slurm backend here: refused, not run locally */
        {"{\"name\":\"a\",\"command\":[\"t\"],\"backend\":\"slurm\"}",
         "backend: this ringd runs jobs on the local backend; the slurm backend is not configured"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"env\":{\"A-B\":\"1\"}}", "env.A-B: 'A-B' is not"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"env\":{\"RING_RANK\":\"1\"}}", "set by ringd"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"env\":{\"A\":1}}", "env.A: env.A must be a string"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"working_dir\":\"rel\"}", "working_dir: working_dir "
                                                                         "must be an absolute"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"max_restarts\":-1}", "max_restarts: max_restarts"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"backend\":\"k8s\"}", "backend: backend must be"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"launcher\":\"srun\"}",
         "launcher: launcher must be \"ringrun\" (the default) or \"mpirun\""},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"labels\":{\"\":\"x\"}}", "label keys must have"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"bogus\":1}", "bogus: unknown field 'bogus'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *spec = NULL;
        char why[512] = "";
        ck_assert_msg(parse(cases[i][0], &spec, why, sizeof(why)) < 0, "accepted %s", cases[i][0]);
        ck_assert_msg(strstr(why, cases[i][1]) != NULL, "%s gave '%s', want '%s'", cases[i][0], why,
                      cases[i][1]);
        ck_assert_ptr_null(spec);
    }
}
END_TEST

/*
 * A job starts in its own new run directory unless working_dir says otherwise, so a program
 * named relative to the directory (./train) can only mean working_dir's; a bare name is
 * looked up in PATH, and an absolute path anywhere.
 */
START_TEST(relative_program_needs_working_dir)
{
    static const char *const ok[] = {
        "{\"name\":\"a\",\"command\":[\"./train\"],\"working_dir\":\"/tmp\"}",
        "{\"name\":\"a\",\"command\":[\"python3\",\"./train.py\"]}",
        "{\"name\":\"a\",\"command\":[\"/bin/true\"]}",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        json_t *spec = NULL;
        char why[512] = "";
        ck_assert_msg(parse(ok[i], &spec, why, sizeof(why)) == 0, "%s: %s", ok[i], why);
        json_decref(spec);
    }
}
END_TEST

/* A JSON string of n copies of "é" (2 bytes each in UTF-8). */
static void long_utf8(char *out, int n)
{
    for (int i = 0; i < n; i++)
        memcpy(out + 2 * i, "\xc3\xa9", 2);
    out[2 * n] = '\0';
}

/*
 * Long non-ASCII keys are cut to fit the messages: a cut inside a character once made the
 * error unrecordable, and the spec passed (201). Every error must come back, as UTF-8.
 */
START_TEST(long_non_ascii_keys_are_still_errors)
{
    /* the JSON before and after the key */
    static const char *const where[][2] = {
        {"{\"name\":\"a\",\"command\":[\"t\"],\"", "\":1}"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"env\":{\"", "\":\"1\"}}"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"labels\":{\"", "\":\"1\"}}"},
        {"{\"name\":\"a\",\"command\":[\"t\"],\"workers\":{\"min\":1,\"max\":1,\"", "\":1}}"},
    };
    char key[1024], text[1200];
    for (int n = 55; n < 140; n += 1) { /* cuts at every parity */
        long_utf8(key, n);
        for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
            json_t *spec = NULL, *errors = NULL, *e;
            int status;
            const char *kind;
            size_t k;
            snprintf(text, sizeof(text), "%s%s%s", where[i][0], key, where[i][1]);
            ck_assert_msg(jobspec_parse(text, strlen(text), NULL, &spec, &errors, &status, &kind) <
                              0,
                          "accepted a %d-character key in case %zu", n, i);
            ck_assert_int_eq(status, 422);
            ck_assert_int_gt(json_array_size(errors), 0);
            json_array_foreach(errors, k, e)
            {
                ck_assert_ptr_nonnull(json_string_value(json_object_get(e, "detail")));
                ck_assert_ptr_nonnull(json_string_value(json_object_get(e, "field")));
            }
            /* and the whole list encodes (a problem body must never be lost) */
            {
                char *dump = json_dumps(errors, 0);
                ck_assert_ptr_nonnull(dump);
                free(dump);
            }
            json_decref(errors);
        }
    }
}
END_TEST

/*
 * Found by fuzzing (tests/fuzz/corpus/jobspec_json/invalid_utf8_near_a_parse_error): Jansson's
 * parse error quotes the input near the fault ("invalid escape near '\"comman\\<0xd4>'"), so
 * a body with bytes that are not UTF-8 made an error text that was not UTF-8 either; it could
 * not be recorded, and the 400 went out with no error at all.
 */
START_TEST(parse_errors_quoting_bad_bytes_are_kept)
{
    static const char text[] = "{\"name\":\"x\",\"comman\\\xd4\x95K\xf6\x7f\"]}";
    json_t *spec = NULL, *errors = NULL;
    const char *detail;
    int status;
    const char *kind;
    struct cluster *c = cluster_create(1, 8, 4);
    struct jobspec_limits lim = {c, "local"};

    ck_assert_int_eq(jobspec_parse(text, sizeof(text) - 1, &lim, &spec, &errors, &status, &kind),
                     -1);
    cluster_free(c);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(kind, "malformed-json");
    ck_assert_int_eq(json_array_size(errors), 1);
    detail = json_string_value(json_object_get(json_array_get(errors, 0), "detail"));
    ck_assert_ptr_nonnull(detail);
    ck_assert_msg(strncmp(detail, "malformed JSON at line 1", 24) == 0, "%s", detail);
    json_decref(errors);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {defaults_are_filled_in,
                            every_rule_names_its_field,
                            long_non_ascii_keys_are_still_errors,
                            parse_errors_quoting_bad_bytes_are_kept,
                            relative_program_needs_working_dir,
                            NULL};
    return unit_main("jobspec", tests, 30);
}
