/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobs.c - ringctl's job commands: submit (flags or a JSON/YAML spec), ls, show, and the
 * actions on one job (cancel, stop, resume, rm).
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/log.h"
#include "http.h"
#include "ringctl.h"
#include "spec_yaml.h"

/* A spec file: YAML when it is named .yaml or .yml, JSON otherwise. NULL after saying why. */
static json_t *load_spec(const char *file)
{
    const char *dot = strrchr(file, '.');
    json_t *spec;
    if (dot != NULL && (!strcmp(dot, ".yaml") || !strcmp(dot, ".yml"))) {
        char err[512];
        if ((spec = spec_yaml_load_file(file, err, sizeof(err))) == NULL)
            log_error("%s", err);
    } else {
        json_error_t jerr;
        if ((spec = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr)) == NULL)
            log_error("%s:%d: %s", file, jerr.line, jerr.text);
    }
    if (spec != NULL && !json_is_object(spec)) {
        log_error("%s: a job spec is a mapping (an object) at the top", file);
        json_decref(spec);
        spec = NULL;
    }
    return spec;
}

/* -n N or MIN:MAX into spec's "workers": 0, or -1 after saying what is wrong. The range
 * is checked by ringd, which knows the cluster. */
static int workers_flag(json_t *spec, char *arg)
{
    char *colon = strchr(arg, ':');
    int lo, hi, bad;
    if (colon != NULL)
        *colon = '\0';
    bad = ringctl__int_all(arg, &lo) < 0 || (colon != NULL && ringctl__int_all(colon + 1, &hi) < 0);
    if (colon != NULL)
        *colon = ':';
    if (bad) {
        log_error("-n '%s' must be N or MIN:MAX", arg);
        return -1;
    }
    if (colon != NULL)
        json_object_set_new(spec, "workers", json_pack("{s:i, s:i}", "min", lo, "max", hi));
    else
        json_object_set_new(spec, "workers", json_integer(lo));
    return 0;
}

/* The program and its arguments (argv[0..argc-1]) as spec's command, and its name (the
 * program's base name, in the characters a name may hold) when spec has none. */
static void set_command(json_t *spec, int argc, char **argv)
{
    json_t *cmd = json_array();
    for (int i = 0; i < argc; i++)
        json_array_append_new(cmd, json_string(argv[i]));
    json_object_set_new(spec, "command", cmd);
    if (!json_object_get(spec, "name")) {
        const char *base = strrchr(argv[0], '/');
        char name[129];
        snprintf(name, sizeof(name), "%s", base ? base + 1 : argv[0]);
        for (char *c = name; *c; c++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *c))
                *c = '-';
        json_object_set_new(spec, "name", json_string(name));
    }
}

/* A program named relative to the directory (./train) means the one here, as in a shell:
 * the job starts in this directory (ringd would otherwise start it in its new run
 * directory, and refuse the spec). */
static void default_working_dir(json_t *spec)
{
    const char *prog = json_string_value(json_array_get(json_object_get(spec, "command"), 0));
    char cwd[4096];
    if (prog != NULL && prog[0] != '/' && strchr(prog, '/') != NULL &&
        json_object_get(spec, "working_dir") == NULL && getcwd(cwd, sizeof(cwd)) != NULL)
        json_object_set_new(spec, "working_dir", json_string(cwd));
}

int ringctl_submit(int argc, char **argv)
{
    static const struct option opts[] = {
        {"workers", required_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},
        {"gpus-per-worker", required_argument, NULL, 'g'},
        {"env", required_argument, NULL, 'e'},
        {"label", required_argument, NULL, 'l'},
        {"max-restarts", required_argument, NULL, 'r'},
        {"priority", required_argument, NULL, 'p'},
        {"workdir", required_argument, NULL, 'w'},
        {"file", required_argument, NULL, 'f'},
        {"idempotency-key", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char usage_submit[] =
        "usage: ringctl submit [-n N|MIN:MAX] [--name N] [--gpus-per-worker G] "
        "[--env K=V] [--label K=V] [--max-restarts R] [--priority P] "
        "[--workdir DIR] [--idempotency-key K] (-f spec.json|spec.yaml | -- program "
        "args...)\n";
    json_t *spec = json_object(), *env = json_object(), *labels = json_object(), *job;
    const char *idem = NULL, *file = NULL;
    char *body;
    int o, rc = 0;

    optind = 1;
    while ((o = getopt_long(argc, argv, "+hn:N:g:e:l:r:p:w:f:k:", opts, NULL)) != -1) {
        char *eq;
        switch (o) {
        case 'n':
            if (workers_flag(spec, optarg) < 0) {
                rc = EXIT_USAGE;
                goto out;
            }
            break;
        case 'N':
            json_object_set_new(spec, "name", json_string(optarg));
            break;
        case 'g':
        case 'r':
        case 'p': {
            static const char *const flag[] = {"--gpus-per-worker", "--max-restarts", "--priority"};
            static const char *const key[] = {"gpus_per_worker", "max_restarts", "priority"};
            int k = o == 'g' ? 0 : o == 'r' ? 1 : 2, v;
            if (ringctl__flag_int(flag[k], optarg, INT_MIN, INT_MAX, "an integer", &v) < 0) {
                rc = EXIT_USAGE;
                goto out;
            }
            json_object_set_new(spec, key[k], json_integer(v));
            break;
        }
        case 'w':
            json_object_set_new(spec, "working_dir", json_string(optarg));
            break;
        case 'e':
        case 'l':
            if ((eq = strchr(optarg, '=')) == NULL) {
                log_error("--%s wants KEY=VALUE, not '%s'", o == 'e' ? "env" : "label", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            *eq = '\0';
            json_object_set_new(o == 'e' ? env : labels, optarg, json_string(eq + 1));
            break;
        case 'f':
            file = optarg;
            break;
        case 'k':
            idem = optarg;
            break;
        case 'h':
            fputs(usage_submit, stdout);
            goto out; /* rc 0 */
        default:
            fputs(usage_submit, stderr);
            rc = EXIT_USAGE;
            goto out;
        }
    }
    if (file != NULL) {
        json_t *f = load_spec(file);
        if (f == NULL) {
            rc = EXIT_USAGE;
            goto out;
        }
        json_object_update_missing(f, spec); /* flags override nothing the file says */
        json_decref(spec);
        spec = f;
    }
    if (optind < argc)
        set_command(spec, argc - optind, argv + optind);
    default_working_dir(spec);
    if (json_object_size(env) > 0)
        json_object_set(spec, "env", env);
    if (json_object_size(labels) > 0)
        json_object_set(spec, "labels", labels);
    body = json_dumps(spec, JSON_COMPACT);
    rc = ringctl__call_idem("POST", "/v1/jobs", body, idem, &job);
    free(body);
    if (rc == 0) {
        if (ringctl__json_out())
            ringctl__print_json(job);
        else
            printf("%s\n", ringctl__str(job, "id"));
        json_decref(job);
    }
out:
    json_decref(env);
    json_decref(labels);
    json_decref(spec);
    return rc;
}

static void workers_text(json_t *spec, char *buf, size_t len)
{
    json_t *w = json_object_get(spec, "workers");
    long long lo = json_integer_value(json_object_get(w, "min")),
              hi = json_integer_value(json_object_get(w, "max"));
    if (lo == hi)
        snprintf(buf, len, "%lld", lo);
    else
        snprintf(buf, len, "%lld-%lld", lo, hi);
}

int ringctl_ls(int argc, char **argv)
{
    static const struct option opts[] = {{"state", required_argument, NULL, 's'},
                                         {"label", required_argument, NULL, 'l'},
                                         {NULL, 0, NULL, 0}};
    char path[1024], q[600] = "", esc[300];
    const char *token_next = NULL;
    json_t *all, *page = NULL, *j;
    size_t i;
    int o, rc;

    optind = 1;
    while ((o = getopt_long(argc, argv, "s:l:", opts, NULL)) != -1) {
        char *e;
        if (o != 's' && o != 'l') {
            fprintf(stderr, "usage: ringctl ls [--state S] [--label K=V]\n");
            return EXIT_USAGE;
        }
        e = curl_easy_escape(NULL, optarg, 0);
        snprintf(esc, sizeof(esc), "&%s=%s", o == 's' ? "state" : "label", e ? e : "");
        curl_free(e);
        strncat(q, esc, sizeof(q) - strlen(q) - 1);
    }
    all = json_array();
    do { /* every page */
        snprintf(path, sizeof(path), "/v1/jobs?page_size=1000%s%s%s", q,
                 token_next ? "&page_token=" : "", token_next ? token_next : "");
        json_decref(page);
        if ((rc = ringctl__call("GET", path, NULL, &page)) != 0) {
            json_decref(all);
            return rc;
        }
        json_array_extend(all, json_object_get(page, "jobs"));
        token_next = json_string_value(json_object_get(page, "next_page_token"));
    } while (token_next != NULL);
    json_decref(page);
    if (ringctl__json_out()) {
        json_t *o2 = json_pack("{s:o}", "jobs", all);
        ringctl__print_json(o2);
        json_decref(o2);
        return 0;
    }
    printf("%-20s %-20s %-10s %-10s %-8s %s\n", "ID", "NAME", "OWNER", "STATE", "WORKERS",
           "CREATED");
    json_array_foreach(all, i, j)
    {
        char w[32];
        workers_text(json_object_get(j, "spec"), w, sizeof(w));
        printf("%-20s %-20.20s %-10.10s %-10s %-8s %s\n", ringctl__str(j, "id"),
               ringctl__str(j, "name"), ringctl__str(j, "owner"), ringctl__str(j, "state"), w,
               ringctl__str(j, "created_at"));
    }
    json_decref(all);
    return 0;
}

int ringctl_show(const char *id)
{
    char path[256];
    json_t *j, *a, *p;
    size_t i;
    int rc;
    ringctl__job_path(path, sizeof(path), id, "");
    if ((rc = ringctl__call("GET", path, NULL, &j)) != 0)
        return rc;
    if (ringctl__json_out()) {
        ringctl__print_json(j);
        json_decref(j);
        return 0;
    }
    printf("job        %s (%s)\nowner      %s\nstate      %s\ncreated    %s\ncheckpoint %s\n",
           ringctl__str(j, "id"), ringctl__str(j, "name"), ringctl__str(j, "owner"),
           ringctl__str(j, "state"), ringctl__str(j, "created_at"),
           ringctl__str(j, "checkpoint_dir"));
    p = json_object_get(j, "progress");
    if (p != NULL)
        printf("progress   epoch %lld/%lld, step %lld/%lld, loss %.4f, %.0f samples/s on %lld "
               "worker%s\n",
               json_integer_value(json_object_get(p, "epoch")),
               json_integer_value(json_object_get(p, "epochs")),
               json_integer_value(json_object_get(p, "step")),
               json_integer_value(json_object_get(p, "total_steps")),
               json_number_value(json_object_get(p, "loss")),
               json_number_value(json_object_get(p, "samples_per_s")),
               json_integer_value(json_object_get(p, "world_size")),
               json_integer_value(json_object_get(p, "world_size")) == 1 ? "" : "s");
    ringctl_show_scaling(j);
    json_array_foreach(json_object_get(j, "attempts"), i, a)
    {
        json_int_t w = json_integer_value(json_object_get(a, "world_size"));
        printf("attempt %lld: %lld worker%s on %s, started %s",
               json_integer_value(json_object_get(a, "number")), w, w == 1 ? "" : "s",
               ringctl__str(a, "hosts"), ringctl__str(a, "started_at"));
        if (json_object_get(a, "ended_at"))
            printf(", ended %s: %s", ringctl__str(a, "ended_at"), ringctl__str(a, "reason"));
        printf("\n");
    }
    json_decref(j);
    return 0;
}

int ringctl_action(const char *method, const char *id, const char *action)
{
    char path[256];
    json_t *j = NULL;
    int rc;
    char suffix[32];
    snprintf(suffix, sizeof(suffix), "%s%s", action ? "/" : "", action ? action : "");
    ringctl__job_path(path, sizeof(path), id, suffix);
    if ((rc = ringctl__call(method, path, NULL, !strcmp(method, "DELETE") ? NULL : &j)) != 0)
        return rc;
    if (j != NULL && ringctl__json_out())
        ringctl__print_json(j);
    else if (j != NULL)
        printf("%s: %s\n", id, ringctl__str(j, "state"));
    else
        printf("%s: removed\n", id);
    json_decref(j);
    return 0;
}
