/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the dtype table, 16-bit float conversions and the reduction kernels. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "unit.h"
#include "ring_internal.h"

START_TEST(dtype_table)
{
    ck_assert_uint_eq(ring_dtype_size(RING_UINT8), 1);
    ck_assert_uint_eq(ring_dtype_size(RING_BFLOAT16), 2);
    ck_assert_uint_eq(ring_dtype_size(RING_INT64), 8);
    ck_assert_uint_eq(ring_dtype_size(RING_DTYPE_COUNT), 0);
    ck_assert_str_eq(ring_dtype_name(RING_FLOAT16), "float16");
    ck_assert_str_eq(ring_dtype_name((ring_dtype_t)99), "invalid");
    ck_assert_str_eq(ring_op_name(RING_AVERAGE), "average");
}
END_TEST

START_TEST(half_known_values)
{
    ck_assert_uint_eq(ring__float_to_half(1.0f), 0x3c00);
    ck_assert_uint_eq(ring__float_to_half(-2.0f), 0xc000);
    ck_assert_uint_eq(ring__float_to_half(65504.0f), 0x7bff);
    ck_assert_uint_eq(ring__float_to_half(65520.0f), 0x7c00); /* rounds up to infinity */
    ck_assert_uint_eq(ring__float_to_half(65519.0f), 0x7bff);
    ck_assert_uint_eq(ring__float_to_half(INFINITY), 0x7c00);
    ck_assert_uint_eq(ring__float_to_half(0x1p-24f), 0x0001); /* smallest subnormal */
    ck_assert_uint_eq(ring__float_to_half(0x1p-25f), 0x0000); /* tie rounds to even: 0 */
    ck_assert_uint_eq(ring__float_to_half(0x1.8p-25f), 0x0001);
    ck_assert_uint_eq(ring__float_to_half(0x1p-14f), 0x0400); /* smallest normal */
    ck_assert_uint_eq(ring__float_to_half(-0.0f), 0x8000);
    /* 1 + 2^-11 is halfway between 1 and the next half: ties to even (1.0) */
    ck_assert_uint_eq(ring__float_to_half(1.0f + 0x1p-11f), 0x3c00);
    ck_assert_uint_eq(ring__float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    ck_assert(isnan(ring__half_to_float(ring__float_to_half(NAN))));
    ck_assert(ring__half_to_float(0x0001) == 0x1p-24f);
    ck_assert(ring__half_to_float(0x7bff) == 65504.0f);
    ck_assert(isinf(ring__half_to_float(0xfc00)) && ring__half_to_float(0xfc00) < 0);
}
END_TEST

START_TEST(half_round_trips_every_value)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = ring__half_to_float((uint16_t)h);
        if (isnan(f))
            continue;
        ck_assert_uint_eq(ring__float_to_half(f), h);
    }
}
END_TEST

START_TEST(bf16_conversions)
{
    ck_assert_uint_eq(ring__float_to_bf16(1.0f), 0x3f80);
    ck_assert(ring__bf16_to_float(0x3f80) == 1.0f);
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even */
    ck_assert_uint_eq(ring__float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    ck_assert_uint_eq(ring__float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    ck_assert(isnan(ring__bf16_to_float(ring__float_to_bf16(NAN))));
    for (uint32_t b = 0; b <= 0xffff; b++) {
        float f = ring__bf16_to_float((uint16_t)b);
        if (!isnan(f))
            ck_assert_uint_eq(ring__float_to_bf16(f), b);
    }
}
END_TEST

START_TEST(int_kernels_wrap_and_compare)
{
    int32_t a[4] = {INT32_MAX, -5, 7, 0}, b[4] = {1, 3, -9, 0}, d[4];
    uint8_t ua[2] = {250, 3}, ub[2] = {10, 4}, ud[2];
    int64_t la[1] = {INT64_MIN}, lb[1] = {-1}, ld[1];

    ring__reduce(d, a, b, 4, RING_INT32, RING_SUM);
    ck_assert_int_eq(d[0], INT32_MIN); /* wraps, as MPI implementations do */
    ck_assert_int_eq(d[1], -2);
    ring__reduce(d, a, b, 4, RING_INT32, RING_MIN);
    ck_assert_int_eq(d[0], 1);
    ck_assert_int_eq(d[2], -9);
    ring__reduce(d, a, b, 4, RING_INT32, RING_MAX);
    ck_assert_int_eq(d[1], 3);
    ring__reduce(d, a, b, 4, RING_INT32, RING_PRODUCT);
    ck_assert_int_eq(d[2], -63);
    ring__reduce(ud, ua, ub, 2, RING_UINT8, RING_SUM);
    ck_assert_uint_eq(ud[0], 4);
    ring__reduce(ud, ua, ub, 2, RING_UINT8, RING_PRODUCT);
    ck_assert_uint_eq(ud[1], 12);
    ring__reduce(ld, la, lb, 1, RING_INT64, RING_PRODUCT);
    ck_assert(ld[0] == INT64_MIN); /* -INT64_MIN wraps to itself */
}
END_TEST

START_TEST(float_kernels_alias_and_half_precision)
{
    float a[1000], b[1000];
    uint16_t h[3], g[3];

    for (int i = 0; i < 1000; i++) {
        a[i] = (float)i;
        b[i] = 0.5f;
    }
    ring__reduce(a, a, b, 1000, RING_FLOAT32, RING_SUM); /* dst aliases a */
    ck_assert(a[999] == 999.5f);
    /* float16 is combined in float32: 2048 + 1 + 1 is exact even though 2049 is not */
    h[0] = ring__float_to_half(2048.0f);
    g[0] = ring__float_to_half(1.0f);
    ring__reduce(h, h, g, 1, RING_FLOAT16, RING_SUM);
    ck_assert(ring__half_to_float(h[0]) == 2048.0f); /* 2049 rounds to even */
    h[1] = ring__float_to_bf16(3.0f);
    g[1] = ring__float_to_bf16(-4.0f);
    ring__reduce(h + 1, h + 1, g + 1, 1, RING_BFLOAT16, RING_MIN);
    ck_assert(ring__bf16_to_float(h[1]) == -4.0f);
}
END_TEST

START_TEST(scale_truncates_and_saturates)
{
    int8_t i8[3] = {100, -100, 7};
    int64_t i64[1] = {INT64_MAX};
    double d[2] = {1.5, -2};
    uint16_t hf[1] = {0x3c00};

    ring__scale(i8, i8, 3, RING_INT8, 2.0);
    ck_assert_int_eq(i8[0], INT8_MAX);
    ck_assert_int_eq(i8[1], INT8_MIN);
    ck_assert_int_eq(i8[2], 14);
    ring__scale(i8, i8, 3, RING_INT8, 0.25);
    ck_assert_int_eq(i8[2], 3); /* 3.5 truncates toward zero */
    ring__scale(i64, i64, 1, RING_INT64, 4.0);
    ck_assert(i64[0] == INT64_MAX);
    ring__scale(d, d, 2, RING_FLOAT64, 0.5);
    ck_assert(d[0] == 0.75 && d[1] == -1);
    ring__scale(hf, hf, 1, RING_FLOAT16, 0.5);
    ck_assert_uint_eq(hf[0], 0x3800);
}
END_TEST

START_TEST(average_divides)
{
    /* AVERAGE's factor 1/n divides: 142 * (float)(1/3) is 47.33334, not 142 / 3 = 47.33333.
     * Every whole sum from -600 to 600, over 3 and 7 ranks, in both float types, alone and
     * fused into the last reduction; a factor that is no reciprocal still multiplies. */
    static const int ranks[] = {3, 7};
    int differs = 0;

    for (int k = 0; k < 2; k++) {
        int n = ranks[k];
        for (int v = -600; v <= 600; v++) {
            float f = (float)v, half = f / 2, out;
            double d = v, dout;
            differs += f * (float)(1.0 / n) != f / (float)n;
            ring__scale(&out, &f, 1, RING_FLOAT32, 1.0 / n);
            ck_assert_msg(out == f / (float)n, "%d / %d: %.9g", v, n, out);
            ring__reduce_scale(&out, &half, &half, 1, RING_FLOAT32, RING_AVERAGE, 1.0 / n);
            ck_assert_msg(out == f / (float)n, "%d / %d fused: %.9g", v, n, out);
            ring__scale(&dout, &d, 1, RING_FLOAT64, 1.0 / n);
            ck_assert(dout == d / n);
            ring__reduce_scale(&dout, &d, &(double){0}, 1, RING_FLOAT64, RING_SUM, 1.0 / n);
            ck_assert(dout == d / n);
        }
    }
    ck_assert_msg(differs > 0, "no value tells a division from a product: the test proves nothing");
    float x = 142, y;
    ring__scale(&y, &x, 1, RING_FLOAT32, 0.3);
    ck_assert(y == x * 0.3f);
}
END_TEST

START_TEST(op_validation)
{
    ck_assert(ring__op_valid(RING_FLOAT32, RING_SUM, 0.5, 2.0));
    ck_assert(!ring__op_valid(RING_FLOAT32, RING_MAX, 0.5, 1.0));
    ck_assert(!ring__op_valid(RING_FLOAT32, RING_MIN, 1.0, 2.0));
    ck_assert(ring__op_valid(RING_INT8, RING_MIN, 1.0, 1.0));
    ck_assert(!ring__op_valid(RING_DTYPE_COUNT, RING_SUM, 1.0, 1.0));
    ck_assert(!ring__op_valid(RING_FLOAT32, RING_OP_COUNT, 1.0, 1.0));
    ck_assert(!ring__op_valid(RING_FLOAT32, RING_SUM, NAN, 1.0));
    ck_assert(!ring__op_valid(RING_FLOAT32, RING_SUM, 1.0, INFINITY));
}
END_TEST

START_TEST(new_dtypes_table)
{
    ck_assert_uint_eq(ring_dtype_size(RING_INT16), 2);
    ck_assert_uint_eq(ring_dtype_size(RING_UINT16), 2);
    ck_assert_uint_eq(ring_dtype_size(RING_BOOL), 1);
    ck_assert_str_eq(ring_dtype_name(RING_INT16), "int16");
    ck_assert_str_eq(ring_dtype_name(RING_UINT16), "uint16");
    ck_assert_str_eq(ring_dtype_name(RING_BOOL), "bool");
    ck_assert_str_eq(ring_op_name(RING_ADASUM), "adasum");
    /* the values of the older dtypes did not move (bindings hard-code them) */
    ck_assert_int_eq(RING_FLOAT64, 7);
    ck_assert_int_eq(RING_INT16, 8);
    ck_assert_int_eq(RING_PRODUCT, 4);
    ck_assert_int_eq(RING_ADASUM, 5);
    ck_assert(ring__dtype_is_float(RING_BFLOAT16) && !ring__dtype_is_float(RING_INT16));
}
END_TEST

START_TEST(int16_kernels_wrap_compare_and_saturate)
{
    int16_t a[3] = {INT16_MAX, -300, 7}, b[3] = {1, 200, -9}, d[3];
    uint16_t ua[3] = {65530, 300, 2}, ub[3] = {10, 200, 40000}, ud[3];

    ring__reduce(d, a, b, 3, RING_INT16, RING_SUM);
    ck_assert_int_eq(d[0], INT16_MIN); /* wraps */
    ck_assert_int_eq(d[1], -100);
    ring__reduce(d, a, b, 3, RING_INT16, RING_MIN);
    ck_assert_int_eq(d[1], -300);
    ck_assert_int_eq(d[2], -9);
    ring__reduce(d, a, b, 3, RING_INT16, RING_PRODUCT);
    ck_assert_int_eq(d[2], -63);
    ring__reduce(ud, ua, ub, 3, RING_UINT16, RING_SUM);
    ck_assert_uint_eq(ud[0], 4); /* 65540 wraps */
    ring__reduce(ud, ua, ub, 3, RING_UINT16, RING_MAX);
    ck_assert_uint_eq(ud[2], 40000); /* compared unsigned: 40000 is no negative number */
    ring__reduce(ud, ua, ub, 3, RING_UINT16, RING_MIN);
    ck_assert_uint_eq(ud[1], 200);
    ring__scale(a, a, 3, RING_INT16, 2.0);
    ck_assert_int_eq(a[0], INT16_MAX);
    ck_assert_int_eq(a[1], -600);
    ring__scale(ua, ua, 3, RING_UINT16, -1.0);
    ck_assert_uint_eq(ua[0], 0); /* saturates at the bottom too */
    ring__scale(ub, ub, 3, RING_UINT16, 0.25);
    ck_assert_uint_eq(ub[0], 2); /* 2.5 truncates */
}
END_TEST

/* Booleans stay 0 or 1: SUM and MAX are OR, PRODUCT and MIN are AND. */
START_TEST(bool_kernels_are_or_and_and)
{
    uint8_t a[4] = {0, 0, 1, 1}, b[4] = {0, 1, 0, 1}, d[4];
    static const uint8_t or_[4] = {0, 1, 1, 1}, and_[4] = {0, 0, 0, 1};

    ring__reduce(d, a, b, 4, RING_BOOL, RING_SUM);
    ck_assert(memcmp(d, or_, 4) == 0);
    ring__reduce(d, a, b, 4, RING_BOOL, RING_MAX);
    ck_assert(memcmp(d, or_, 4) == 0);
    ring__reduce(d, a, b, 4, RING_BOOL, RING_PRODUCT);
    ck_assert(memcmp(d, and_, 4) == 0);
    ring__reduce(d, a, b, 4, RING_BOOL, RING_MIN);
    ck_assert(memcmp(d, and_, 4) == 0);
    memcpy(d, a, 4);
    ring__reduce(d, d, d, 4, RING_BOOL, RING_SUM); /* x OR x: still 0 or 1, not 2 */
    ck_assert(memcmp(d, a, 4) == 0);
}
END_TEST

/* v in dtype t at buf (integers saturate; booleans are v != 0). */
static void put_value(void *buf, ring_dtype_t t, double v)
{
    char one[8];
    if (t == RING_BOOL) {
        *(uint8_t *)buf = v != 0;
        return;
    }
    ring__neutral(one, 1, t, RING_PRODUCT); /* 1 in t */
    ring__scale(buf, one, 1, t, v);
}

/* What a joined rank contributes leaves every other value as it is, for every dtype and
 * element-wise op, including the extremes of each type. */
START_TEST(neutral_leaves_every_value_alone)
{
    static const double samples[] = {0, 1, -1, 3, -7, 100, 127, -128, 255, 32767, -32768, 65535};
    static const ring_op_t ops[] = {RING_SUM, RING_PRODUCT, RING_MIN, RING_MAX};
    char x[8], n[8], d[8];
    int16_t i16;
    uint16_t u16;

    for (int t = 0; t < RING_DTYPE_COUNT; t++) {
        size_t es = ring_dtype_size((ring_dtype_t)t);
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            ring__neutral(n, 1, (ring_dtype_t)t, ops[o]);
            for (size_t k = 0; k < sizeof(samples) / sizeof(samples[0]); k++) {
                put_value(x, (ring_dtype_t)t, samples[k]);
                ring__reduce(d, x, n, 1, (ring_dtype_t)t, ops[o]);
                ck_assert_msg(memcmp(d, x, es) == 0, "dtype %s op %s value %g",
                              ring_dtype_name((ring_dtype_t)t), ring_op_name(ops[o]), samples[k]);
            }
        }
    }
    ring__neutral(&i16, 1, RING_INT16, RING_MIN);
    ck_assert_int_eq(i16, INT16_MAX);
    ring__neutral(&i16, 1, RING_INT16, RING_MAX);
    ck_assert_int_eq(i16, INT16_MIN);
    ring__neutral(&u16, 1, RING_UINT16, RING_MIN);
    ck_assert_uint_eq(u16, UINT16_MAX);
    ring__neutral(&u16, 1, RING_UINT16, RING_MAX);
    ck_assert_uint_eq(u16, 0);
    ring__neutral(x, 1, RING_BOOL, RING_MIN);
    ck_assert_uint_eq((uint8_t)x[0], 1);
    ring__neutral(x, 1, RING_BOOL, RING_SUM);
    ck_assert_uint_eq((uint8_t)x[0], 0);
}
END_TEST

START_TEST(op_validation_new_types)
{
    ck_assert(ring__op_valid(RING_BOOL, RING_SUM, 1.0, 1.0));
    ck_assert(ring__op_valid(RING_BOOL, RING_MIN, 1.0, 1.0));
    ck_assert(!ring__op_valid(RING_BOOL, RING_AVERAGE, 1.0, 1.0));
    ck_assert(!ring__op_valid(RING_BOOL, RING_SUM, 2.0, 1.0));
    ck_assert(ring__op_valid(RING_INT16, RING_AVERAGE, 0.5, 1.0));
    ck_assert(ring__op_valid(RING_UINT16, RING_PRODUCT, 1.0, 1.0));
    for (int t = 0; t < RING_DTYPE_COUNT; t++)
        ck_assert_int_eq(ring__op_valid((ring_dtype_t)t, RING_ADASUM, 0.5, 2.0),
                         ring__dtype_is_float((ring_dtype_t)t));
}
END_TEST

/* Adasum's pairwise combination: orthogonal vectors add, equal ones stay, a zero vector
 * keeps its partner, and the coefficients are 1 - a.b / 2|x|^2. */
START_TEST(adasum_kernels)
{
    static const ring_dtype_t ts[] = {RING_FLOAT16, RING_BFLOAT16, RING_FLOAT32, RING_FLOAT64};
    static const double va[4] = {1, 0, 2, 0}, vb[4] = {0, 3, 0, -1};
    for (size_t k = 0; k < sizeof(ts) / sizeof(ts[0]); k++) {
        ring_dtype_t t = ts[k];
        size_t es = ring_dtype_size(t);
        char a[32], b[32], z[32], s[32];
        double p[3];
        for (int i = 0; i < 4; i++) { /* small integers: exact in every float dtype */
            put_value(a + i * es, t, va[i]);
            put_value(b + i * es, t, vb[i]);
            put_value(z + i * es, t, 0);
        }
        ring__adasum_partials(a, b, 4, t, p);
        ck_assert(p[0] == 0 && p[1] == 5 && p[2] == 10);
        /* orthogonal: both coefficients 1, so the sum */
        ck_assert(ring__adasum_coeff(p[0], p[1]) == 1.0 && ring__adasum_coeff(p[0], p[2]) == 1.0);
        memcpy(s, a, sizeof(s));
        ring__adasum_combine(s, b, 4, t, 1.0, 1.0);
        ring__adasum_partials(s, s, 4, t, p);
        ck_assert(p[1] == 15); /* |(1, 3, 2, -1)|^2 */
        /* equal: a.a / 2|a|^2 = 1/2 each, so a (+) a = a */
        ring__adasum_partials(a, a, 4, t, p);
        ck_assert(ring__adasum_coeff(p[0], p[1]) == 0.5);
        memcpy(s, a, sizeof(s));
        ring__adasum_combine(s, a, 4, t, 0.5, 0.5);
        ck_assert(memcmp(s, a, 4 * es) == 0);
        /* zero: its own coefficient is 1 whatever the dot product, its partner's 1 - 0 */
        ring__adasum_partials(z, b, 4, t, p);
        ck_assert(p[0] == 0 && p[1] == 0);
        ck_assert(ring__adasum_coeff(p[0], p[1]) == 1.0 && ring__adasum_coeff(p[0], p[2]) == 1.0);
    }
    /* parallel, b = 2a: a.b = 2|a|^2, so a's coefficient is 0 and b's 3/4: (+) = 1.5 a */
    ck_assert(ring__adasum_coeff(2.0, 1.0) == 0.0);
    ck_assert(ring__adasum_coeff(2.0, 4.0) == 0.75);
    ck_assert(ring__adasum_coeff(5.0, 1e-310) == 1.0); /* an underflowed norm counts as zero */
}
END_TEST

/* The fused last step gives bitwise what reduce then scale give, for every dtype, at
 * lengths on both sides of its block boundaries, in place and not, and with factor 1. */
START_TEST(reduce_scale_matches_two_passes)
{
    static const size_t lens[] = {0, 1, 7, 511, 512, 513, 1023, 1024, 1025, 4096, 5003};
    static const double factors[] = {1.0, 0.5, 1.0 / 3.0, 3.0};
    enum { MAXN = 5003 };
    static char a[MAXN * 8], b[MAXN * 8], want[MAXN * 8], got[MAXN * 8 + 1], inplace[MAXN * 8];

    for (int dt = 0; dt < RING_DTYPE_COUNT; dt++) {
        size_t es = ring_dtype_size((ring_dtype_t)dt);
        for (size_t i = 0; i < sizeof(a); i++) { /* values that are valid in every dtype */
            a[i] = (char)((i * 7) % 61);
            b[i] = (char)((i * 13) % 53);
        }
        if (dt == RING_FLOAT32 || dt == RING_FLOAT64) {
            for (size_t i = 0; i < MAXN; i++) {
                if (dt == RING_FLOAT32) {
                    ((float *)a)[i] = (float)i * 0.37f - 100.0f;
                    ((float *)b)[i] = 1.0f / (float)(i + 1);
                } else {
                    ((double *)a)[i] = (double)i * 0.37 - 100.0;
                    ((double *)b)[i] = 1.0 / (double)(i + 1);
                }
            }
        }
        for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
            size_t n = lens[l];
            for (size_t f = 0; f < sizeof(factors) / sizeof(factors[0]); f++) {
                for (int op = RING_SUM; op <= RING_PRODUCT; op++) {
                    if (op == RING_AVERAGE)
                        continue;
                    ring__reduce(want, a, b, n, (ring_dtype_t)dt, (ring_op_t)op);
                    ring__scale(want, want, n, (ring_dtype_t)dt, factors[f]);
                    memset(got, 0x5a, sizeof(got));
                    ring__reduce_scale(got, a, b, n, (ring_dtype_t)dt, (ring_op_t)op, factors[f]);
                    ck_assert_msg(memcmp(want, got, n * es) == 0, "dtype %d op %d n %zu f %g", dt,
                                  op, n, factors[f]);
                    ck_assert_msg((unsigned char)got[n * es] == 0x5a,
                                  "past n: dtype %d op %d n %zu", dt, op, n);
                    memcpy(inplace, a, n * es);
                    ring__reduce_scale(inplace, inplace, b, n, (ring_dtype_t)dt, (ring_op_t)op,
                                       factors[f]);
                    ck_assert(memcmp(want, inplace, n * es) == 0);
                }
            }
        }
    }
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        dtype_table,
        half_known_values,
        half_round_trips_every_value,
        bf16_conversions,
        int_kernels_wrap_and_compare,
        float_kernels_alias_and_half_precision,
        scale_truncates_and_saturates,
        average_divides,
        op_validation,
        new_dtypes_table,
        int16_kernels_wrap_compare_and_saturate,
        bool_kernels_are_or_and_and,
        neutral_leaves_every_value_alone,
        op_validation_new_types,
        adasum_kernels,
        reduce_scale_matches_two_passes,
        NULL,
    };
    return unit_main("reduce", tests, 30);
}
