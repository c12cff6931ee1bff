/* SPDX-License-Identifier: Apache-2.0 */
/* speed.c - throughput per size and the Amdahl-plus-ring model (see speed.h). */
#include <math.h>
#include <string.h>

#include "speed.h"

void speed_init(struct speed *s, enum speed_mode mode)
{
    memset(s, 0, sizeof(*s));
    s->mode = mode;
}

static double ring_term(const struct speed *s, double n)
{
    double r = 2.0 * (n - 1.0) / n;
    return s->mode == SPEED_WEAK ? r / n : r;
}

/* Solves the 3x3 system m x = v by Cramer's rule; 0 when it is singular. */
static int solve3(double m[3][3], const double v[3], double x[3])
{
    double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                 m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                 m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    if (fabs(det) < 1e-300)
        return 0;
    for (int k = 0; k < 3; k++) {
        double t[3][3];
        memcpy(t, m, sizeof(t));
        for (int i = 0; i < 3; i++)
            t[i][k] = v[i];
        x[k] = (t[0][0] * (t[1][1] * t[2][2] - t[1][2] * t[2][1]) -
                t[0][1] * (t[1][0] * t[2][2] - t[1][2] * t[2][0]) +
                t[0][2] * (t[1][0] * t[2][1] - t[1][1] * t[2][0])) /
               det;
    }
    return 1;
}

/*
 * Least squares of tau = sum x[k] * basis_k(n) over the observations, using only the terms
 * in use[] (the others are 0). Weighted by 1/tau^2, so that the error is relative: a fast
 * size counts as much as a slow one. Returns 1 with x when every used term is >= 0.
 */
static int fit(const struct speed *s, const int use[3], double x[3])
{
    double m[3][3] = {{0}}, v[3] = {0};
    for (int i = 0; i < s->nobs; i++) {
        double n = s->obs[i].workers, tau = 1.0 / s->obs[i].thr, w = 1.0 / (tau * tau);
        double f[3] = {1.0, 1.0 / n, ring_term(s, n)};
        for (int j = 0; j < 3; j++) {
            if (!use[j])
                continue;
            v[j] += w * f[j] * tau;
            for (int k = 0; k < 3; k++)
                if (use[k])
                    m[j][k] += w * f[j] * f[k];
        }
    }
    for (int j = 0; j < 3; j++) {
        if (!use[j]) { /* pin the unused term to 0 */
            for (int k = 0; k < 3; k++)
                m[j][k] = m[k][j] = 0;
            m[j][j] = 1;
            v[j] = 0;
        }
    }
    if (!solve3(m, v, x))
        return 0;
    for (int j = 0; j < 3; j++) {
        if (x[j] < 0)
            return 0;
    }
    return 1;
}

static double speed_at_uncached(const struct speed *s, int workers);

/* Fits a, b and c to the observations. */
static void fit_model(struct speed *s)
{
    static const int tries[][3] = {{1, 1, 1}, {0, 1, 1}, {1, 1, 0}, {0, 1, 0}};
    double x[3];
    int sizes = s->nobs;

    s->a = s->b = s->c = 0;
    if (sizes == 0)
        return;
    if (sizes == 1) {
        /* One size: no serial part, and the prior's ring cost. tau(n0) = b (1/n0 +
         * k g(n0)) with c = k b. */
        double n = s->obs[0].workers, tau = 1.0 / s->obs[0].thr;
        s->b = tau / (1.0 / n + SPEED_PRIOR_COMM * ring_term(s, n));
        s->c = SPEED_PRIOR_COMM * s->b;
        return;
    }
    for (size_t t = sizes >= 3 ? 0 : 1; t < sizeof(tries) / sizeof(tries[0]); t++) {
        if (fit(s, tries[t], x) && x[1] > 0) {
            s->a = x[0];
            s->b = x[1];
            s->c = x[2];
            return;
        }
    }
    /* Nothing fits without negative terms (noise, or a job that slows down as it grows):
     * perfect scaling from the fastest observation per worker is the honest fallback. */
    for (int i = 0; i < s->nobs; i++) {
        double b = s->obs[i].workers / s->obs[i].thr;
        if (s->b == 0 || b < s->b)
            s->b = b;
    }
}

/* After every change of the observations (speed_observe is the only place they change):
 * the model, then speed_at's cache (speed.h), so that the cache is never stale. */
static void refit(struct speed *s)
{
    fit_model(s);
    for (int k = 1; k <= SPEED_CACHED; k++)
        s->at[k] = speed_at_uncached(s, k);
}

void speed_observe(struct speed *s, int workers, double thr)
{
    int i, victim = 0;
    if (workers <= 0 || !(thr > 0) || !isfinite(thr))
        return;
    for (i = 0; i < s->nobs; i++) {
        if (s->obs[i].workers == workers) {
            struct speed_obs *o = &s->obs[i];
            /* A running mean that trusts recent reports more after a few: a job's speed
             * drifts (data, evaluation epochs) and old reports should fade. */
            int k = o->count < 4 ? o->count : 4;
            o->thr = (o->thr * k + thr) / (k + 1);
            o->count++;
            refit(s);
            return;
        }
        if (s->obs[i].count < s->obs[victim].count)
            victim = i;
    }
    if (s->nobs < SPEED_SIZES)
        victim = s->nobs++;
    s->obs[victim] = (struct speed_obs){workers, thr, 1};
    refit(s);
}

int speed_observed(const struct speed *s, int workers, double *thr)
{
    for (int i = 0; i < s->nobs; i++) {
        if (s->obs[i].workers == workers) {
            *thr = s->obs[i].thr;
            return 1;
        }
    }
    return 0;
}

static double model(const struct speed *s, double n)
{
    double tau = s->a + s->b / n + s->c * ring_term(s, n);
    return tau > 0 ? 1.0 / tau : 0;
}

/*
 * Below the largest size measured, throughput does not fall as workers are added. Fitted
 * on noisy runs, a large ring term c bends the model down at small n (weak scaling: 1
 * worker is predicted faster than 2 once c > b), and the dynamic policy would then shrink
 * a job on its own for a speed nobody measured. So below the next measured size H, a
 * prediction at n is the model's least value on [n, H-1] (its throughput has at most one
 * valley, below 2 workers under weak scaling, none under strong: the least is at n, H-1
 * or 2), held under the measured throughput of every larger size and over that of every
 * smaller one (the bound from above wins where the measurements disagree). Beyond the
 * largest size measured the model alone speaks: there a ring can cost more than a worker
 * adds.
 */
double speed_predict(const struct speed *s, int workers)
{
    double lo = 0, hi = INFINITY, thr;
    int above = 0;
    if (workers <= 0 || s->b <= 0)
        return 0;
    for (int i = 0; i < s->nobs; i++) {
        const struct speed_obs *o = &s->obs[i];
        if (o->workers > workers) {
            hi = o->thr < hi ? o->thr : hi;
            above = above == 0 || o->workers < above ? o->workers : above;
        } else if (o->workers < workers && o->thr > lo) {
            lo = o->thr;
        }
    }
    thr = model(s, workers);
    if (above == 0)
        return thr;
    thr = fmin(thr, model(s, above - 1));
    if (workers < 2 && above - 1 > 2)
        thr = fmin(thr, model(s, 2));
    thr = thr > lo ? thr : lo;
    return thr < hi ? thr : hi;
}

static double speed_at_uncached(const struct speed *s, int workers)
{
    double thr;
    if (speed_observed(s, workers, &thr))
        return thr;
    return speed_predict(s, workers);
}

double speed_at(const struct speed *s, int workers)
{
    if (workers >= 1 && workers <= SPEED_CACHED)
        return s->at[workers];
    return speed_at_uncached(s, workers);
}
