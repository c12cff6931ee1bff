/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringctl - the command-line client of ringd's REST API.
 *
 *   ringctl submit -n 4 -- ./train --epochs 10
 *   ringctl submit -f job.json               (or job.yaml)
 *   ringctl ls [--state S] [--label k=v]      ringctl show ID
 *   ringctl cancel|stop|resume|rm ID          ringctl events ID [-f]
 *   ringctl logs ID [--rank R] [--stderr | --launcher] [--tail N] [-f]
 *   ringctl cluster                           ringctl policy [NAME]
 *   ringctl token create NAME [--admin] [--user U] [--expires-in 30d | --expires-at T]
 *   ringctl token list                        ringctl token revoke ID
 *   ringctl admin backup FILE                 (a copy of ringd's database, taken live)
 *
 * RINGMASTER_URL (default http://127.0.0.1:8080) and RINGMASTER_TOKEN configure it. Output
 * is a table for people, or the server's JSON with --json.
 *
 * Exit status: 0 done; 1 the server refused the request (4xx); 2 bad usage; 3 not found;
 * 4 conflict (the job's state does not allow it); 5 not authorized; 69 ringd unreachable or
 * failing (5xx); 70 the job ended FAILED or CANCELLED while following it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "common/log.h"
#include "http.h"
#include "ringctl.h"

/* ---- the command table: a new command is a row here and a function in its group's file ---- */

static int run_show(int argc, char **argv)
{
    (void)argc;
    return ringctl_show(argv[1]);
}

static int run_rm(int argc, char **argv)
{
    (void)argc;
    return ringctl_action("DELETE", argv[1], NULL);
}

/* cancel, stop, resume: POST /v1/jobs/ID/<command>. */
static int run_action(int argc, char **argv)
{
    (void)argc;
    return ringctl_action("POST", argv[1], argv[0]);
}

static int run_events(int argc, char **argv)
{
    int follow = argc >= 3 && (!strcmp(argv[2], "-f") || !strcmp(argv[2], "--follow"));
    return ringctl_events(argv[1], follow);
}

static int run_cluster(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return ringctl_cluster();
}

struct command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the name */
    int min_argc;                      /* 2: it takes a job id */
};

static const struct command commands[] = {
    {"submit", ringctl_submit, 1},
    {"ls", ringctl_ls, 1},
    {"show", run_show, 2},
    {"cancel", run_action, 2},
    {"stop", run_action, 2},
    {"resume", run_action, 2},
    {"rm", run_rm, 2},
    {"events", run_events, 2},
    {"logs", ringctl_logs, 1},
    {"cluster", run_cluster, 1},
    {"policy", ringctl_policy, 1},
    {"token", ringctl_token, 1},
    {"admin", ringctl_admin, 1},
};

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ringctl [--json] [--cacert FILE] [--insecure-http] COMMAND ...\n"
               "  submit [-n N|MIN:MAX] [options] (-f spec.json|spec.yaml | -- program args...)\n"
               "  ls [--state S] [--label K=V]\n"
               "  show ID\n"
               "  cancel ID | stop ID | resume ID | rm ID\n"
               "  events ID [-f]\n"
               "  logs ID [--rank R] [--stderr | --launcher] [--tail N] [-f]\n"
               "  cluster\n"
               "  policy [NAME]   (shows the scheduler; switching the policy takes an admin)\n"
               "  token create NAME [--admin] [--user UNIX_USER] [--expires-in N[s|m|h|d] |\n"
               "    --expires-at RFC3339] | "
               "token list | token revoke ID\n"
               "  admin backup FILE   (ringd's database, taken while it runs; admins only)\n"
               "Environment: RINGMASTER_URL (default http://127.0.0.1:8080), RINGMASTER_TOKEN,\n"
               "RINGMASTER_CACERT (as --cacert). Tokens go in clear text only to loopback,\n"
               "unless --insecure-http.\n"
               "Exit status: 0 ok, 1 refused, 2 usage, 3 not found, 4 conflict, 5 not "
               "authorized,\n69 ringd unreachable or failing, 70 a followed job FAILED or was "
               "CANCELLED.\n");
}

int main(int argc, char **argv)
{
    const struct command *c;
    const char *cmd;
    int rc;

    log_init("ringctl", LOG_STYLE_TEXT);
    {
        const char *url = getenv("RINGMASTER_URL");
        ringctl__set_url(url != NULL && *url != '\0' ? url : "http://127.0.0.1:8080");
    }
    ringctl__conn.token = getenv("RINGMASTER_TOKEN");
    ringctl__conn.cacert = getenv("RINGMASTER_CACERT");
    while (argc > 1 && argv[1][0] == '-') {
        if (!strcmp(argv[1], "--json"))
            ringctl__set_json_out(1);
        else if (!strcmp(argv[1], "--insecure-http"))
            ringctl__conn.insecure_http = 1;
        else if (!strcmp(argv[1], "--cacert")) {
            if (argc < 3) {
                log_error("--cacert needs a file (the CA certificate of ringd's "
                          "HTTPS)");
                return EXIT_USAGE;
            }
            ringctl__conn.cacert = argv[2];
            argv++;
            argc--;
        } else if (!strcmp(argv[1], "--version")) {
            printf("ringctl %s\n", RING_VERSION_STRING);
            return 0;
        } else if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
            usage(stdout);
            return 0;
        } else {
            log_error("unknown option %s", argv[1]);
            usage(stderr);
            return EXIT_USAGE;
        }
        argv++;
        argc--;
    }
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if ((rc = ringctl__token_transport_ok()) != 0)
        return rc;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    cmd = argv[1];
    argv++;
    argc--;
    if ((c = find_command(cmd)) != NULL && argc >= c->min_argc) {
        rc = c->run(argc, argv);
    } else {
        log_error("unknown command or missing job id: %s", cmd);
        usage(stderr);
        rc = EXIT_USAGE;
    }
    curl_global_cleanup();
    return rc;
}
