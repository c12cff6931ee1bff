/* SPDX-License-Identifier: Apache-2.0 */
/* slurm_job.c - an attempt as a Slurm batch job: shape, script, state and GRES strings. */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "scheduler/backend/jobfs.h"
#include "scheduler/backend/mpirun.h"
#include "slurm_job.h"

int slurm_shape(int workers, int cpw, int gpw, int node_cpus, int node_gpus,
                struct slurm_shape *out, struct error *err)
{
    int per_node;

    if (workers < 1 || cpw < 1 || gpw < 0)
        return errprintf(err, "a job needs at least one worker and one CPU per worker");
    if (cpw > node_cpus || gpw > node_gpus)
        return errprintf(err,
                         "a worker needs %d CPUs and %d GPUs, but the largest Slurm node has %d "
                         "and %d",
                         cpw, gpw, node_cpus, node_gpus);
    per_node = node_cpus / cpw;
    if (gpw > 0 && node_gpus / gpw < per_node)
        per_node = node_gpus / gpw;
    if (per_node > workers)
        per_node = workers;
    *out = (struct slurm_shape){
        .nodes = (workers + per_node - 1) / per_node,
        .ntasks = workers,
        .tasks_per_node = per_node,
        .cpus_per_task = cpw,
        .gpus_per_node = per_node * gpw,
    };
    return 0;
}

void slurm_gpu_tres(int n, char *buf, size_t len)
{
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
    snprintf(buf, len, "gres/gpu:%d", n);
#else
    snprintf(buf, len, "gres:gpu:%d", n);
#endif
}

char *slurm_script(enum slurm_launcher launcher, int grace_s, int gpus_per_task, const char *job_id,
                   int attempt)
{
    char gpus[48] = "", *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    if (f == NULL)
        return NULL;
    if (gpus_per_task > 0)
        snprintf(gpus, sizeof(gpus), " --gpus-per-task=%d", gpus_per_task);
    fprintf(f,
            "#!/bin/sh\n"
            "# ringd: attempt %d of job %s. The program and its arguments are this script's\n"
            "# arguments (\"$@\"), so that no part of them is read by this shell, each with\n"
            "# \"" LAUNCH_WORD_MARK
            "\" in front, which each rank's wrapper takes off: srun and mpirun\n"
            "# would take a \":\" among them for the start of another program.\n",
            attempt, job_id);
    if (launcher == SLURM_LAUNCH_SRUN) {
        /* A failing rank's peers get grace_s to notice (srun's --wait=0 means forever);
         * each rank writes its own files, which ringd's logs API reads. */
        fprintf(f,
                "exec srun --mpi=pmix --kill-on-bad-exit=0 --wait=%d%s \\\n"
                "    --output=\"$RING_RUN_DIR/rank.%%t/stdout\" "
                "--error=\"$RING_RUN_DIR/rank.%%t/stderr\" -- sh -c '%s' rank \"$@\"\n",
                grace_s > 0 ? grace_s : 1, gpus, LAUNCH_UNMARK RANK_STOP_WRAPPER);
    } else {
        /* Open MPI's mpirun takes the hosts and slots from the allocation and starts its
         * daemons through srun; each rank finds its peers through mpirun's PMIx server.
         * The wrapper (mpirun.h) gives each rank its own output files and turns mpirun's
         * SIGUSR2 into the SIGTERM of a stop. */
        fprintf(f, "exec mpirun -np \"$SLURM_NTASKS\" --bind-to none sh -c '%s' rank \"$@\"\n",
                MPIRUN_WRAPPER);
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

int slurm_unreachable(int e)
{
    switch (e) {
    case EAGAIN:
    case SLURM_COMMUNICATIONS_CONNECTION_ERROR:
    case SLURM_COMMUNICATIONS_SEND_ERROR:
    case SLURM_COMMUNICATIONS_RECEIVE_ERROR:
    case SLURM_COMMUNICATIONS_SHUTDOWN_ERROR:
    case SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR:
    case SLURMCTLD_COMMUNICATIONS_SEND_ERROR:
    case SLURMCTLD_COMMUNICATIONS_RECEIVE_ERROR:
    case SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR:
    case SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT:
    case ESLURM_IN_STANDBY_MODE:
    case ESLURM_IN_STANDBY_USE_BACKUP:
        return 1;
    default:
        return 0;
    }
}

/* Slurm's reasons that say why a job ended or still waits, in ringd's words. */
static const char *reason_text(uint16_t r)
{
    switch (r) {
    case WAIT_PRIORITY:
        return "waiting: higher-priority jobs first";
    case WAIT_DEPENDENCY:
        return "waiting: a dependency";
    case WAIT_RESOURCES:
        return "waiting for resources";
    case WAIT_PART_NODE_LIMIT:
        return "the request exceeds the partition's node limit";
    case WAIT_PART_TIME_LIMIT:
        return "the request exceeds the partition's time limit";
    case WAIT_PART_DOWN:
        return "the partition is down";
    case WAIT_PART_INACTIVE:
        return "the partition is inactive";
    case WAIT_HELD:
        return "held by an administrator";
    case WAIT_HELD_USER:
        return "held by its user";
    case FAIL_DOWN_PARTITION:
        return "its partition went down";
    case FAIL_DOWN_NODE:
        return "a node of its allocation failed";
    case FAIL_BAD_CONSTRAINTS:
        return "its constraints cannot be satisfied";
    case FAIL_SYSTEM:
        return "Slurm system failure";
    case FAIL_LAUNCH:
        return "Slurm could not launch it";
    case FAIL_EXIT_CODE:
        return "non-zero exit code";
    case FAIL_TIMEOUT:
        return "time limit reached";
    case FAIL_INACTIVE_LIMIT:
        return "Slurm's inactivity limit reached";
    case FAIL_ACCOUNT:
        return "invalid account";
    case FAIL_QOS:
        return "invalid QOS";
    default:
        return NULL;
    }
}

void slurm_outcome(const slurm_job_info_t *j, struct slurm_outcome *out)
{
    uint32_t base = j->job_state & JOB_STATE_BASE;
    int ec = (int)j->exit_code;
    const char *why = reason_text(j->state_reason), *what = NULL;
    char extra[160] = "";

    memset(out, 0, sizeof(*out));
    if (j->state_desc != NULL && *j->state_desc != '\0')
        snprintf(extra, sizeof(extra), "%s", j->state_desc);
    else if (why != NULL)
        snprintf(extra, sizeof(extra), "%s", why);
    switch (base) {
    case JOB_PENDING:
        snprintf(out->reason, sizeof(out->reason), "pending in Slurm%s%s", *extra ? ": " : "",
                 extra);
        return;
    case JOB_RUNNING:
    case JOB_SUSPENDED:
        out->running = 1;
        if (base == JOB_SUSPENDED)
            snprintf(out->reason, sizeof(out->reason), "suspended by Slurm");
        return;
    case JOB_COMPLETE:
        what = "completed";
        break;
    case JOB_FAILED:
        what = "failed";
        break;
    case JOB_CANCELLED:
        what = "cancelled (scancel)";
        out->cancelled = 1;
        break;
    case JOB_TIMEOUT:
        what = "time limit reached";
        break;
    case JOB_NODE_FAIL:
        what = "node failure";
        out->lost = 1;
        break;
    case JOB_PREEMPTED:
        what = "preempted";
        break;
    case JOB_BOOT_FAIL:
        what = "node boot failure";
        out->lost = 1;
        break;
    case JOB_DEADLINE:
        what = "deadline reached";
        break;
    case JOB_OOM:
        what = "out of memory";
        break;
    default:
        what = "ended in an unknown state";
        break;
    }
    out->ended = 1;
    /* exit_code is the batch script's wait status; a job that never ran has none. */
    if (WIFSIGNALED(ec))
        out->status = 128 + WTERMSIG(ec);
    else
        out->status = WEXITSTATUS(ec);
    if (base != JOB_COMPLETE && out->status == 0) /* ended by Slurm, not by the program */
        out->status = base == JOB_CANCELLED || base == JOB_TIMEOUT ? 128 + SIGTERM : 1;
    if (base == JOB_NODE_FAIL && j->nodes != NULL)
        snprintf(out->reason, sizeof(out->reason), "Slurm job %u: node failure on %s", j->job_id,
                 j->nodes);
    else if (*extra && base != JOB_COMPLETE && j->state_reason != FAIL_EXIT_CODE)
        snprintf(out->reason, sizeof(out->reason), "Slurm job %u: %s (%s)", j->job_id, what, extra);
    else
        snprintf(out->reason, sizeof(out->reason), "Slurm job %u: %s", j->job_id, what);
}

/* Parses an unsigned decimal at *p, advancing it; -1 when there is none. */
static long number(const char **p)
{
    long v = 0;
    if (!isdigit((unsigned char)**p))
        return -1;
    while (isdigit((unsigned char)**p)) {
        v = v * 10 + (**p - '0');
        if (v > 1000000)
            return -1;
        (*p)++;
    }
    return v;
}

/* The entry of name in a comma-separated GRES list ("gpu:2,mps:100"), or NULL. Entries
 * are name[:type][:count][(...)]; commas inside parentheses belong to the entry. */
static const char *entry(const char *gres, const char *name, const char **end)
{
    size_t n = strlen(name);
    const char *p = gres;
    while (p != NULL && *p) {
        const char *e = p;
        int depth = 0;
        while (*e && (depth > 0 || *e != ',')) {
            depth += *e == '(';
            depth -= *e == ')';
            e++;
        }
        if (strncmp(p, name, n) == 0 && (p[n] == ':' || p[n] == '(' || p + n == e)) {
            *end = e;
            return p;
        }
        p = *e ? e + 1 : e;
    }
    return NULL;
}

int slurm_gres_count(const char *gres, const char *name)
{
    const char *end, *p = gres ? entry(gres, name, &end) : NULL, *last;
    long count;
    if (p == NULL)
        return 0;
    /* name[:type][:count][(...)]: the count is the last ':' field before any '(', and a
     * name with no count ("gpu", "gpu:a100") means one. */
    for (const char *q = p; q < end && *q != '('; q++) {
        if (*q == ':')
            p = q + 1;
    }
    last = p;
    count = number(&last);
    if (count < 0 || (last < end && *last != '('))
        return 1;
    return (int)count;
}

int slurm_gres_indexes(const char *detail, const char *name, int *idx, int max)
{
    const char *end, *p = detail ? entry(detail, name, &end) : NULL;
    int n = 0;
    if (p == NULL || (p = strstr(p, "IDX:")) == NULL || p > end)
        return 0;
    p += 4;
    while (p < end && n < max) {
        long lo = number(&p), hi;
        if (lo < 0)
            break;
        hi = lo;
        if (*p == '-') {
            p++;
            if ((hi = number(&p)) < lo)
                break;
        }
        for (long i = lo; i <= hi && n < max; i++)
            idx[n++] = (int)i;
        if (*p != ',')
            break;
        p++;
    }
    return n;
}

int slurm_check_ranks_started(const char *run_dir, int ntasks, struct slurm_outcome *out)
{
    char path[4400], list[64] = "";
    size_t used = 0;
    int missing = 0, first = -1;
    struct stat st;

    if (!out->ended || out->cancelled || run_dir == NULL || !*run_dir)
        return 0;
    for (int r = 0; r < ntasks; r++) {
        snprintf(path, sizeof(path), "%s/rank.%d/stdout", run_dir, r);
        /* The job owns rank.N: a link there must not make ringd tell whether a path it
         * points to exists. */
        if (jobfs_stat(path, &st) == 0)
            continue;
        if (missing++ == 0)
            first = r;
        /* A short list: a whole node's ranks are usually consecutive. */
        if (used < sizeof(list) - 16)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d",
                                     missing > 1 ? ", " : "", r);
        else if (list[used - 1] != '.')
            used += (size_t)snprintf(list + used, sizeof(list) - used, ", ...");
    }
    if (missing == 0)
        return 0;
    out->lost = 1;
    if (out->status == 0) {
        out->status = 1;
        if (snprintf(out->reason, sizeof(out->reason),
                     "Slurm reports success, but %d of %d ranks never started (rank%s %s: no "
                     "rank.%d/stdout); slurmd's log on their node says why",
                     missing, ntasks, missing > 1 ? "s" : "", list,
                     first) >= (int)sizeof(out->reason))
            memcpy(out->reason + sizeof(out->reason) - 4, "...", 4);
    } else {
        size_t at = strlen(out->reason);
        if (snprintf(out->reason + at, sizeof(out->reason) - at,
                     "; %d of %d ranks never started (rank%s %s)", missing, ntasks,
                     missing > 1 ? "s" : "", list) >= (int)(sizeof(out->reason) - at))
            memcpy(out->reason + sizeof(out->reason) - 5, "...)", 5); /* cut, but closed */
    }
    return missing;
}
