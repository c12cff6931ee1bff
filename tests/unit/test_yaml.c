/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ringctl's YAML specs: the core schema's types, aliases, and the errors. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/ringctl/spec_yaml.h"
#include "unit.h"

static char err[512];

/* Loads text as a .yaml file; NULL with err on failure. */
static json_t *load(const char *text)
{
    char path[] = "/tmp/ring-yaml-XXXXXX";
    int fd = mkstemp(path);
    json_t *out;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    out = spec_yaml_load_file(path, err, sizeof(err));
    unlink(path);
    return out;
}

/* The JSON text of a YAML text (compact, keys in order), for comparisons. */
static char *as_json(const char *text)
{
    json_t *v = load(text);
    char *s;
    ck_assert_msg(v != NULL, "%s", err);
    s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(v);
    return s;
}

#define EXPECT_JSON(yaml, want)                                                                    \
    do {                                                                                           \
        char *got_ = as_json(yaml);                                                                \
        ck_assert_str_eq(got_, want);                                                              \
        free(got_);                                                                                \
    } while (0)

START_TEST(core_schema_scalars)
{
    EXPECT_JSON("a: 12\nb: -7\nc: 0x1f\nd: 0o17\ne: 1.5\nf: 2e3\ng: .5\nh: +4\n",
                "{\"a\":12,\"b\":-7,\"c\":31,\"d\":15,\"e\":1.5,\"f\":2000.0,\"g\":0.5,"
                "\"h\":4}");
    EXPECT_JSON("a: true\nb: False\nc: null\nd: ~\ne:\n", "{\"a\":true,\"b\":false,\"c\":null,"
                                                          "\"d\":null,\"e\":null}");
    /* quoted scalars and things that only look like numbers stay strings */
    EXPECT_JSON("a: \"12\"\nb: 'true'\nc: 1.2.3\nd: 08x\ne: yes\nf: v1\n",
                "{\"a\":\"12\",\"b\":\"true\",\"c\":\"1.2.3\",\"d\":\"08x\",\"e\":\"yes\","
                "\"f\":\"v1\"}");
}
END_TEST

START_TEST(collections_and_aliases)
{
    EXPECT_JSON("cmd: [./train, --epochs, 3]\nw: {min: 1, max: 4}\nl:\n  - x\n  - y\n",
                "{\"cmd\":[\"./train\",\"--epochs\",3],\"l\":[\"x\",\"y\"],\"w\":{\"max\":4,"
                "\"min\":1}}");
    EXPECT_JSON("a: &x {k: v}\nb: *x\n", "{\"a\":{\"k\":\"v\"},\"b\":{\"k\":\"v\"}}");
    EXPECT_JSON("s: |\n  line one\n  line two\n", "{\"s\":\"line one\\nline two\\n\"}");
    EXPECT_JSON("# only a comment before\nname: x # and after\n", "{\"name\":\"x\"}");
}
END_TEST

START_TEST(errors_say_where)
{
    ck_assert_ptr_null(load("name: x\nname: y\n"));
    ck_assert_msg(strstr(err, ":2:1: duplicate key 'name'") != NULL, "%s", err);
    ck_assert_ptr_null(load("a: [1, 2\n"));
    ck_assert_msg(strstr(err, ":2:1: ") != NULL, "%s", err);
    ck_assert_ptr_null(load("? [a, b]\n: c\n"));
    ck_assert_msg(strstr(err, "mapping key must be a plain string") != NULL, "%s", err);
    ck_assert_ptr_null(load("a: 99999999999999999999\n"));
    ck_assert_msg(strstr(err, "integer out of range") != NULL, "%s", err);
    ck_assert_ptr_null(load("a: .inf\n"));
    ck_assert_msg(strstr(err, "cannot be sent as JSON") != NULL, "%s", err);
    ck_assert_ptr_null(load(""));
    ck_assert_msg(strstr(err, "no YAML document") != NULL, "%s", err);
    ck_assert_ptr_null(spec_yaml_load_file("/nonexistent/spec.yaml", err, sizeof(err)));
    ck_assert_msg(strstr(err, "No such file") != NULL, "%s", err);
}
END_TEST

START_TEST(deep_nesting_is_refused)
{
    char text[1024] = "";
    for (int i = 0; i < 100; i++)
        strcat(text, "[");
    for (int i = 0; i < 100; i++)
        strcat(text, "]");
    ck_assert_ptr_null(load(text));
    ck_assert_msg(strstr(err, "nested too deeply") != NULL, "%s", err);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {core_schema_scalars, collections_and_aliases, errors_say_where,
                            deep_nesting_is_refused, NULL};
    return unit_main("yaml", tests, 10);
}
