/* SPDX-License-Identifier: Apache-2.0 */
/*
 * train - the example data-parallel trainer: a small MLP (or logistic regression with
 * --hidden 0) for binary classification, trained with SGD on all ranks at once.
 *
 *   ringrun -np 4 ./train --epochs 10 --checkpoint-dir ckpt
 *
 * - Data: generated from --seed, one sample at a time from its index (so each rank makes
 *   only its own shard), or read from --data FILE.csv ("label,x1,...,xD" per line).
 * - Sharding: every epoch shuffles the sample indices with (seed, epoch) and rank r takes
 *   positions r, r+size, ... as PyTorch's DistributedSampler does.
 * - Gradients are averaged with one allreduce per step; the learning rate is scaled by
 *   the world size (the local batch stays fixed), as Horovod recommends.
 * - Rank 0 prints the loss over the whole dataset after every epoch, and writes
 *   $RING_RUN_DIR/progress.json after every epoch, after an attempt's first step and about
 *   every second (step, total steps, samples/s, and samples done of the job's total).
 * - Checkpoints hold the parameters, the epoch and how many samples of it were consumed,
 *   nothing that depends on the world size, so a job can resume on any number of ranks.
 *   Rank 0 writes them atomically (temporary file, fsync, rename, fsync of the directory).
 * - A stop request (SIGTERM) on any rank is agreed on by libring's engine, so every rank
 *   sees ring_stop_requested() turn true after the same step; rank 0 then checkpoints and
 *   all exit 75 (EX_TEMPFAIL: stopped, resumable).
 *
 * Exit status: 0 done, 75 stopped after a checkpoint, 1 runtime error, 2 bad arguments.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"

#define EXIT_STOPPED 75
/* Seconds between mid-epoch progress reports: often enough for a scheduler to follow the
 * speed, rarely enough that the atomic rewrite costs nothing measurable. */
#define REPORT_S     1.0
#define CKPT_MAGIC   "RINGCKPT"
#define CKPT_VERSION 1u

struct config {
    int epochs, features, hidden, batch;
    long samples;
    double lr;
    uint64_t seed;
    const char *data_path;
    const char *ckpt_dir;
    int fresh;
    int step_sleep_ms;
    int quiet;
};

struct dataset {
    long n;
    int d;
    float *x; /* n * d, only when read from CSV */
    float *y;
};

struct model {
    int d, h;
    size_t nparams;
    float *p; /* W1[h][d], b1[h], w2[h], b2 (h > 0); or w[d], b (h == 0) */
};

static int rank, size;

static void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void die(int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "train: rank %d: ", rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

static void check(int rc, const char *what)
{
    if (rc != 0)
        die(1, "%s: %s (%s)", what, ring_strerror(rc), ring_last_error());
}

/* ---- deterministic randomness: splitmix64, a counter-based generator ---- */

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), a pure function of its three inputs. */
static float uniform(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t r = mix(seed ^ mix(a * 0x100000001b3ull ^ mix(b)));
    return (float)((double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
}

/* ---- data ---- */

/* The synthetic task: a noisy label from a fixed nonlinear teacher. */
static void sample(const struct config *cfg, const struct dataset *ds, long i, float *x, float *y)
{
    float s;
    if (ds->x != NULL) {
        memcpy(x, ds->x + i * ds->d, (size_t)ds->d * sizeof(float));
        *y = ds->y[i];
        return;
    }
    s = 0;
    for (int j = 0; j < cfg->features; j++) {
        x[j] = uniform(cfg->seed, (uint64_t)i, (uint64_t)j + 1);
        s += x[j] * uniform(cfg->seed ^ 0x7eac4e7ull, 0, (uint64_t)j);
    }
    s += 0.8f * x[0] * x[1 % cfg->features];
    *y = s > 0 ? 1.0f : 0.0f;
    if (uniform(cfg->seed, (uint64_t)i, 0) > 0.9f) /* 5% label noise */
        *y = 1.0f - *y;
}

static void load_csv(const char *path, struct dataset *ds)
{
    FILE *f = fopen(path, "r");
    char line[65536];
    long cap = 0;

    if (f == NULL)
        die(2, "cannot open --data %s: %s", path, strerror(errno));
    ds->n = 0;
    ds->d = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        int d = 0;
        char *p = line, *end;
        float vals[1025];
        if (line[0] == '\n' || line[0] == '#')
            continue;
        while (d < 1025) {
            vals[d] = strtof(p, &end);
            if (end == p)
                die(2, "%s:%ld: expected a number", path, ds->n + 1);
            d++;
            p = end;
            if (*p != ',')
                break;
            p++;
        }
        if (d < 2)
            die(2, "%s:%ld: want label,x1,...,xD", path, ds->n + 1);
        if (ds->d < 0)
            ds->d = d - 1;
        else if (ds->d != d - 1)
            die(2, "%s:%ld: %d features, the first line had %d", path, ds->n + 1, d - 1, ds->d);
        if (vals[0] != 0.0f && vals[0] != 1.0f)
            die(2, "%s:%ld: label must be 0 or 1", path, ds->n + 1);
        if (ds->n == cap) {
            long ncap = cap ? cap * 2 : 1024;
            float *nx = realloc(ds->x, (size_t)ncap * (size_t)ds->d * sizeof(float));
            float *ny;
            if (nx == NULL)
                die(1, "out of memory reading %s", path);
            ds->x = nx;
            ny = realloc(ds->y, (size_t)ncap * sizeof(float));
            if (ny == NULL)
                die(1, "out of memory reading %s", path);
            ds->y = ny;
            cap = ncap;
        }
        ds->y[ds->n] = vals[0];
        memcpy(ds->x + ds->n * ds->d, vals + 1, (size_t)ds->d * sizeof(float));
        ds->n++;
    }
    fclose(f);
    if (ds->n == 0)
        die(2, "%s holds no samples", path);
}

/* perm = the sample order of one epoch: a Fisher-Yates shuffle seeded by (seed, epoch). */
static void shuffle(long *perm, long n, uint64_t seed, int epoch)
{
    for (long i = 0; i < n; i++)
        perm[i] = i;
    for (long i = n - 1; i > 0; i--) {
        uint64_t r = mix(seed ^ mix((uint64_t)epoch * 0x51ed27ull + (uint64_t)i));
        long j = (long)(r % (uint64_t)(i + 1));
        long t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ---- model ---- */

static void model_init(struct model *m, int d, int h, uint64_t seed)
{
    m->d = d;
    m->h = h;
    m->nparams = h > 0 ? (size_t)h * (size_t)d + 2 * (size_t)h + 1 : (size_t)d + 1;
    m->p = calloc(m->nparams, sizeof(float));
    if (m->p == NULL)
        die(1, "out of memory for %zu parameters", m->nparams);
    if (h > 0) {
        float s1 = 1.0f / sqrtf((float)d), s2 = 1.0f / sqrtf((float)h);
        for (int i = 0; i < h * d; i++)
            m->p[i] = s1 * uniform(seed ^ 0xa11ceull, 1, (uint64_t)i);
        for (int i = 0; i < h; i++)
            m->p[h * d + h + i] = s2 * uniform(seed ^ 0xa11ceull, 2, (uint64_t)i);
    }
}

static float sigmoid(float z)
{
    return 1.0f / (1.0f + expf(-z));
}

/* Binary cross-entropy of one sample; adds its gradient to grad when grad != NULL. */
static float forward_backward(const struct model *m, const float *x, float y, float *grad,
                              float *hid)
{
    int d = m->d, h = m->h;
    const float *p = m->p;
    float z, q, dz, loss;

    if (h == 0) {
        z = p[d];
        for (int j = 0; j < d; j++)
            z += p[j] * x[j];
    } else {
        const float *w1 = p, *b1 = p + h * d, *w2 = p + h * d + h;
        z = p[h * d + 2 * h];
        for (int i = 0; i < h; i++) {
            float a = b1[i];
            for (int j = 0; j < d; j++)
                a += w1[i * d + j] * x[j];
            hid[i] = a > 0 ? a : 0;
            z += w2[i] * hid[i];
        }
    }
    q = sigmoid(z);
    loss = -(y * logf(fmaxf(q, 1e-7f)) + (1 - y) * logf(fmaxf(1 - q, 1e-7f)));
    if (grad == NULL)
        return loss;
    dz = q - y;
    if (h == 0) {
        for (int j = 0; j < d; j++)
            grad[j] += dz * x[j];
        grad[d] += dz;
    } else {
        const float *w2 = p + h * d + h;
        for (int i = 0; i < h; i++) {
            float dh = hid[i] > 0 ? dz * w2[i] : 0;
            for (int j = 0; j < d; j++)
                grad[i * d + j] += dh * x[j];
            grad[h * d + i] += dh;
            grad[h * d + h + i] += dz * hid[i];
        }
        grad[h * d + 2 * h] += dz;
    }
    return loss;
}

/* Mean loss and accuracy over the whole dataset: each rank its shard, then a sum. */
static void evaluate(const struct config *cfg, const struct dataset *ds, const struct model *m,
                     double *loss, double *acc)
{
    double t[3] = {0, 0, 0}; /* loss sum, correct, count */
    float *x = malloc((size_t)m->d * sizeof(float)),
          *hid = malloc((size_t)(m->h + 1) * sizeof(float));
    float y;

    if (x == NULL || hid == NULL)
        die(1, "out of memory");
    for (long i = rank; i < ds->n; i += size) {
        float l;
        sample(cfg, ds, i, x, &y);
        l = forward_backward(m, x, y, NULL, hid);
        t[0] += l;
        /* loss < log 2 means the predicted probability of the true label is above 1/2 */
        t[1] += l < 0.69314718f ? 1 : 0;
        t[2] += 1;
    }
    check(ring_allreduce(RING_IN_PLACE, t, 3, RING_FLOAT64, RING_SUM), "allreduce(loss)");
    *loss = t[0] / t[2];
    *acc = t[1] / t[2];
    free(x);
    free(hid);
}

/* ---- checkpoints ---- */

struct ckpt_header {
    char magic[8];
    uint32_t version;
    uint32_t features, hidden;
    uint32_t epoch;    /* epochs completed */
    uint64_t consumed; /* samples of the current epoch already trained on */
    uint64_t seed;
    uint64_t nparams;
    uint64_t checksum; /* FNV-1a over the parameters */
};

static uint64_t fnv1a(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void save_checkpoint(const char *dir, const struct config *cfg, const struct model *m,
                            int epoch, uint64_t consumed)
{
    char path[4096], tmp[4200];
    struct ckpt_header h = {.version = CKPT_VERSION};
    int fd, dfd;

    memcpy(h.magic, CKPT_MAGIC, 8);
    h.features = (uint32_t)m->d;
    h.hidden = (uint32_t)m->h;
    h.epoch = (uint32_t)epoch;
    h.consumed = consumed;
    h.seed = cfg->seed;
    h.nparams = m->nparams;
    h.checksum = fnv1a(m->p, m->nparams * sizeof(float));
    snprintf(path, sizeof(path), "%s/checkpoint.bin", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        die(1, "cannot write checkpoint %s: %s", tmp, strerror(errno));
    if (write_all(fd, &h, sizeof(h)) < 0 || write_all(fd, m->p, m->nparams * sizeof(float)) < 0 ||
        fsync(fd) < 0)
        die(1, "cannot write checkpoint %s: %s", tmp, strerror(errno));
    close(fd);
    if (rename(tmp, path) < 0)
        die(1, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    /* The rename is durable only once the directory is synced. */
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) < 0)
            die(1, "cannot sync %s: %s", dir, strerror(errno));
        close(dfd);
    }
}

/* Returns 1 and fills m, epoch, consumed when a checkpoint exists; 0 when none. */
static int load_checkpoint(const char *dir, const struct config *cfg, struct model *m, int *epoch,
                           uint64_t *consumed)
{
    char path[4096];
    struct ckpt_header h;
    FILE *f;

    snprintf(path, sizeof(path), "%s/checkpoint.bin", dir);
    f = fopen(path, "rb");
    if (f == NULL) {
        if (errno == ENOENT)
            return 0;
        die(1, "cannot open %s: %s", path, strerror(errno));
    }
    if (fread(&h, sizeof(h), 1, f) != 1 || memcmp(h.magic, CKPT_MAGIC, 8) != 0 ||
        h.version != CKPT_VERSION)
        die(1, "%s is not a version %u checkpoint of this trainer", path, CKPT_VERSION);
    if (h.features != (uint32_t)m->d || h.hidden != (uint32_t)m->h || h.nparams != m->nparams)
        die(2,
            "%s is for --features %u --hidden %u, not %d and %d; use another "
            "--checkpoint-dir or --fresh",
            path, h.features, h.hidden, m->d, m->h);
    if (h.seed != cfg->seed)
        die(2, "%s was trained with --seed %llu, not %llu", path, (unsigned long long)h.seed,
            (unsigned long long)cfg->seed);
    if (fread(m->p, sizeof(float), m->nparams, f) != m->nparams ||
        fnv1a(m->p, m->nparams * sizeof(float)) != h.checksum)
        die(1, "%s is truncated or corrupt", path);
    fclose(f);
    *epoch = (int)h.epoch;
    *consumed = h.consumed;
    return 1;
}

/* The worker contract's progress report. samples and total_samples count the whole job
 * (every attempt, whatever its world size), so that a scheduler knows how much is left. */
static void write_progress(int epoch, int epochs, long step, long total, double loss,
                           double samples_per_s, double samples, double total_samples)
{
    const char *dir = getenv("RING_RUN_DIR");
    char path[4096], tmp[4200];
    FILE *f;

    if (dir == NULL || *dir == '\0')
        return;
    snprintf(path, sizeof(path), "%s/progress.json", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL)
        return; /* progress is advisory; training goes on without it */
    fprintf(f,
            "{\"epoch\":%d,\"epochs\":%d,\"step\":%ld,\"total_steps\":%ld,\"loss\":%.6f,"
            "\"samples_per_s\":%.1f,\"world_size\":%d,\"samples\":%.0f,\"total_samples\":%.0f}\n",
            epoch, epochs, step, total, loss, samples_per_s, size, samples, total_samples);
    if (fclose(f) == 0)
        rename(tmp, path);
}

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: train [--epochs N] [--samples N] [--features D] [--hidden H] [--batch B]\n"
               "             [--lr LR] [--seed S] [--data FILE.csv] [--checkpoint-dir DIR]\n"
               "             [--fresh] [--step-sleep-ms MS] [--quiet] [--version]\n"
               "Run it with ringrun -np N. Exit status: 0 done, 75 stopped (resumable),\n"
               "1 error, 2 bad arguments.\n");
}

/* optarg as an integer in [lo, hi], or exit 2 naming the option. */
static long int_arg(const char *name, long lo, long hi)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(optarg, &end, 10);
    if (errno != 0 || end == optarg || *end != '\0' || v < lo || v > hi)
        die(2, "bad value '%s' for --%s: want an integer in [%ld, %ld]", optarg, name, lo, hi);
    return v;
}

static void parse(int argc, char **argv, struct config *c)
{
    static const struct option opts[] = {
        {"epochs", required_argument, NULL, 'e'},
        {"samples", required_argument, NULL, 'n'},
        {"features", required_argument, NULL, 'd'},
        {"hidden", required_argument, NULL, 'H'},
        {"batch", required_argument, NULL, 'b'},
        {"lr", required_argument, NULL, 'l'},
        {"seed", required_argument, NULL, 's'},
        {"data", required_argument, NULL, 'D'},
        {"checkpoint-dir", required_argument, NULL, 'c'},
        {"fresh", no_argument, NULL, 'f'},
        {"step-sleep-ms", required_argument, NULL, 'S'},
        {"quiet", no_argument, NULL, 'q'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;
    char *end;

    *c = (struct config){.epochs = 10,
                         .samples = 16384,
                         .features = 16,
                         .hidden = 16,
                         .batch = 32,
                         .lr = 0.05,
                         .seed = 42};
    c->ckpt_dir = getenv("RING_CHECKPOINT_DIR");
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'e':
            c->epochs = (int)int_arg("epochs", 1, 1000000);
            break;
        case 'n':
            c->samples = int_arg("samples", 1, 1L << 40);
            break;
        case 'd':
            c->features = (int)int_arg("features", 1, 1024);
            break;
        case 'H':
            c->hidden = (int)int_arg("hidden", 0, 4096);
            break;
        case 'b':
            c->batch = (int)int_arg("batch", 1, 1 << 20);
            break;
        case 'S':
            c->step_sleep_ms = (int)int_arg("step-sleep-ms", 0, 60000);
            break;
        case 's':
            c->seed = (uint64_t)int_arg("seed", 0, LONG_MAX);
            break;
        case 'l':
            errno = 0;
            c->lr = strtod(optarg, &end);
            if (errno != 0 || *end != '\0' || !(c->lr > 0 && c->lr < 1e6))
                die(2, "bad value '%s' for --lr: want a positive number", optarg);
            break;
        case 'D':
            c->data_path = optarg;
            break;
        case 'c':
            c->ckpt_dir = optarg;
            break;
        case 'f':
            c->fresh = 1;
            break;
        case 'q':
            c->quiet = 1;
            break;
        case 'V':
            printf("train (Ringmaster example) %s, libring %s\n", RING_VERSION_STRING,
                   ring_version());
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc)
        die(2, "unexpected argument '%s' (see --help)", argv[optind]);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    struct config cfg;
    struct dataset ds = {0};
    struct model m;
    int epoch = 0, rc, status = 0;
    uint64_t consumed = 0;
    double loss, acc;
    float *grad, *x, *hid, y;
    long *perm;

    parse(argc, argv, &cfg);
    if ((rc = ring_init()) != 0)
        die(1, "ring_init: %s (%s)", ring_strerror(rc), ring_last_error());
    rank = ring_rank();
    size = ring_size();
    if (cfg.data_path != NULL) {
        load_csv(cfg.data_path, &ds);
        cfg.features = ds.d;
        cfg.samples = ds.n;
    } else {
        ds.n = cfg.samples;
        ds.d = cfg.features;
    }
    model_init(&m, cfg.features, cfg.hidden, cfg.seed);

    /* Rank 0 decides where training starts and broadcasts it, as Horovod's
     * broadcast_parameters does, so every rank starts from the same state. */
    if (cfg.ckpt_dir != NULL && rank == 0) {
        if (mkdir(cfg.ckpt_dir, 0755) < 0 && errno != EEXIST)
            die(1, "cannot create --checkpoint-dir %s: %s", cfg.ckpt_dir, strerror(errno));
        if (!cfg.fresh && load_checkpoint(cfg.ckpt_dir, &cfg, &m, &epoch, &consumed))
            printf("resuming from %s/checkpoint.bin at epoch %d (+%llu samples) on %d rank%s\n",
                   cfg.ckpt_dir, epoch, (unsigned long long)consumed, size, size == 1 ? "" : "s");
    }
    {
        int64_t where[2] = {epoch, (int64_t)consumed};
        check(ring_broadcast(where, 2, RING_INT64, 0), "broadcast(start)");
        epoch = (int)where[0];
        consumed = (uint64_t)where[1];
        check(ring_broadcast(m.p, m.nparams, RING_FLOAT32, 0), "broadcast(parameters)");
    }

    grad = malloc(m.nparams * sizeof(float));
    x = malloc((size_t)cfg.features * sizeof(float));
    hid = malloc((size_t)(cfg.hidden + 1) * sizeof(float));
    perm = malloc((size_t)ds.n * sizeof(long));
    if (grad == NULL || x == NULL || hid == NULL || perm == NULL)
        die(1, "out of memory");

    evaluate(&cfg, &ds, &m, &loss, &acc);
    if (rank == 0 && !cfg.quiet)
        printf("start: %ld samples, %zu parameters, %d rank%s, lr %.4g x %d, loss %.4f\n", ds.n,
               m.nparams, size, size == 1 ? "" : "s", cfg.lr, size, loss);

    /* Progress reports mid-epoch: after this attempt's first step (a scheduler measures its
     * start-up overhead up to there), then at most every REPORT_S. */
    double last_report = 0, reported_at = now_s();
    long since_report = 0;
    for (; epoch < cfg.epochs; epoch++, consumed = 0) {
        long global_batch = (long)cfg.batch * size;
        long steps = (ds.n - (long)consumed) / global_batch;
        long total_steps = ds.n / global_batch * cfg.epochs;
        float lr = (float)(cfg.lr * size);
        double t0 = now_s();
        long done = 0;

        shuffle(perm, ds.n, cfg.seed, epoch);
        for (long s = 0; s < steps; s++) {
            /* One position of the epoch's order per rank: rank r takes every size-th. */
            long base = (long)consumed + s * global_batch;
            memset(grad, 0, m.nparams * sizeof(float));
            for (int b = 0; b < cfg.batch; b++) {
                sample(&cfg, &ds, perm[base + (long)b * size + rank], x, &y);
                forward_backward(&m, x, y, grad, hid);
            }
            for (size_t i = 0; i < m.nparams; i++)
                grad[i] /= (float)cfg.batch;
            check(ring_allreduce(RING_IN_PLACE, grad, m.nparams, RING_FLOAT32, RING_AVERAGE),
                  "allreduce(gradients)");
            for (size_t i = 0; i < m.nparams; i++)
                m.p[i] -= lr * grad[i];
            done++;
            /* libring agrees on stop requests during negotiation: every rank sees the flag
             * turn after the same allreduce, so all stop after this same step. */
            if (ring_stop_requested()) {
                uint64_t at = consumed + (uint64_t)(s + 1) * (uint64_t)global_batch;
                fprintf(stderr, "rank %d: stop agreed after epoch %d step %ld\n", rank, epoch, s);
                if (rank == 0) {
                    if (cfg.ckpt_dir != NULL)
                        save_checkpoint(cfg.ckpt_dir, &cfg, &m, epoch, at);
                    printf("stop requested: checkpointed at epoch %d + %llu samples; exiting %d\n",
                           epoch, (unsigned long long)at, EXIT_STOPPED);
                    fflush(stdout);
                }
                status = EXIT_STOPPED;
                goto done;
            }
            if (cfg.step_sleep_ms > 0)
                usleep((useconds_t)cfg.step_sleep_ms * 1000);
            since_report++;
            if (rank == 0 && (last_report == 0 || now_s() - last_report >= REPORT_S)) {
                double t = now_s(), at = (double)consumed + (double)(s + 1) * global_batch;
                write_progress(
                    epoch, cfg.epochs, epoch * (ds.n / global_batch) + (long)(at / global_batch),
                    total_steps, loss,
                    t > reported_at ? since_report * global_batch / (t - reported_at) : 0,
                    (double)epoch * ds.n + at, (double)ds.n * cfg.epochs);
                last_report = reported_at = t;
                since_report = 0;
            }
        }
        evaluate(&cfg, &ds, &m, &loss, &acc);
        if (rank == 0) {
            double dt = now_s() - t0;
            double sps = dt > 0 ? (double)(done * global_batch) / dt : 0;
            if (cfg.ckpt_dir != NULL)
                save_checkpoint(cfg.ckpt_dir, &cfg, &m, epoch + 1, 0);
            write_progress(epoch + 1, cfg.epochs, (epoch + 1) * (ds.n / global_batch), total_steps,
                           loss, sps, (double)(epoch + 1) * ds.n, (double)ds.n * cfg.epochs);
            reported_at = now_s();
            since_report = 0;
            printf("epoch %d/%d loss %.4f accuracy %.3f (%.0f samples/s)\n", epoch + 1, cfg.epochs,
                   loss, acc, sps);
            fflush(stdout);
        }
    }
    if (rank == 0)
        printf("final loss %.6f accuracy %.4f\n", loss, acc);
done:
    free(grad);
    free(x);
    free(hid);
    free(perm);
    free(m.p);
    free(ds.x);
    free(ds.y);
    ring_finalize();
    return status;
}
