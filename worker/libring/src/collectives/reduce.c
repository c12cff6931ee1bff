/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reduce.c - dtype table and the element-wise reduction kernels.
 *
 * The kernels are plain loops over one dtype and one op, so that the compiler vectorizes
 * them (GCC does at -O2 and above, with a runtime check for the dst/a/b overlap). Integer
 * arithmetic goes through the unsigned type of the same width: overflow wraps, as it does
 * in MPI implementations, instead of being undefined behaviour. float16 and bfloat16 are
 * widened to float32, combined there, and rounded back to nearest-even once per call.
 */
#include <math.h>
#include <string.h>

#include "collectives/collectives.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[RING_DTYPE_COUNT] = {
    [RING_UINT8] = {"uint8", 1},     [RING_INT8] = {"int8", 1},
    [RING_INT32] = {"int32", 4},     [RING_INT64] = {"int64", 8},
    [RING_FLOAT16] = {"float16", 2}, [RING_BFLOAT16] = {"bfloat16", 2},
    [RING_FLOAT32] = {"float32", 4}, [RING_FLOAT64] = {"float64", 8},
    [RING_INT16] = {"int16", 2},     [RING_UINT16] = {"uint16", 2},
    [RING_BOOL] = {"bool", 1},
};

static const char *const op_names[RING_OP_COUNT] = {
    [RING_SUM] = "sum", [RING_AVERAGE] = "average", [RING_MIN] = "min",
    [RING_MAX] = "max", [RING_PRODUCT] = "product", [RING_ADASUM] = "adasum",
};

size_t ring_dtype_size(ring_dtype_t dtype)
{
    return (unsigned)dtype < RING_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *ring_dtype_name(ring_dtype_t dtype)
{
    return (unsigned)dtype < RING_DTYPE_COUNT ? dtypes[dtype].name : "invalid";
}

const char *ring_op_name(ring_op_t op)
{
    return (unsigned)op < RING_OP_COUNT ? op_names[op] : "invalid";
}

int ring__dtype_is_float(ring_dtype_t dtype)
{
    return dtype == RING_FLOAT16 || dtype == RING_BFLOAT16 || dtype == RING_FLOAT32 ||
           dtype == RING_FLOAT64;
}

int ring__op_valid(ring_dtype_t dtype, ring_op_t op, double prescale, double postscale)
{
    int scaled = prescale != 1.0 || postscale != 1.0;
    if ((unsigned)dtype >= RING_DTYPE_COUNT || (unsigned)op >= RING_OP_COUNT)
        return 0;
    if (!isfinite(prescale) || !isfinite(postscale))
        return 0;
    /* Scaling before MIN/MAX would be well defined but is never what a caller means, and
     * Horovod rejects it too; refusing keeps the semantics simple. */
    if ((op == RING_MIN || op == RING_MAX) && scaled)
        return 0;
    /* A boolean has no average, and a scaled one would be no boolean. */
    if (dtype == RING_BOOL && (op == RING_AVERAGE || scaled))
        return 0;
    /* Adasum's dot products and norms are of real vectors. */
    if (op == RING_ADASUM && !ring__dtype_is_float(dtype))
        return 0;
    return 1;
}

/* ---- 16-bit floats ---- */

static uint32_t float_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    return x;
}

static float bits_float(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

float ring__half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) /* inf and NaN keep their payload */
        return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) /* normal: rebias 15 -> 127 */
        return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0)
        return bits_float(sign);
    /* subnormal: mant * 2^-24, exact in float32 */
    return (sign ? -1.0f : 1.0f) * (float)mant * 0x1p-24f;
}

uint16_t ring__float_to_half(float f)
{
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;

    if (absx > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)(sign | 0x7e00u);
    if (absx >= 0x477ff000u) /* >= 65520 rounds to infinity (65504 is the largest half) */
        return (uint16_t)(sign | 0x7c00u);
    if (absx >= 0x38800000u) { /* normal half: rebias and round to nearest even */
        uint32_t r = absx - 0x38000000u;
        r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
        return (uint16_t)(sign | r);
    }
    if (absx < 0x33000000u) /* below 2^-25: rounds to zero */
        return (uint16_t)sign;
    {
        /* subnormal half: value = q * 2^-24 */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14 .. 24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
}

float ring__bf16_to_float(uint16_t b)
{
    return bits_float((uint32_t)b << 16);
}

uint16_t ring__float_to_bf16(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- kernels ---- */

#define MIN_(x, y) ((y) < (x) ? (y) : (x))
#define MAX_(x, y) ((y) > (x) ? (y) : (x))

/* Integers: T the type, U its unsigned twin for wrapping SUM and PRODUCT. */
#define DEFINE_INT_REDUCE(name, T, U)                                                              \
    static void reduce_##name(T *dst, const T *a, const T *b, size_t n, ring_op_t op)              \
    {                                                                                              \
        size_t i;                                                                                  \
        switch ((int)op) {                                                                         \
        case RING_SUM:                                                                             \
        case RING_AVERAGE:                                                                         \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = (T)((U)a[i] + (U)b[i]);                                                   \
            break;                                                                                 \
        case RING_PRODUCT:                                                                         \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = (T)((U)a[i] * (U)b[i]);                                                   \
            break;                                                                                 \
        case RING_MIN:                                                                             \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = MIN_(a[i], b[i]);                                                         \
            break;                                                                                 \
        case RING_MAX:                                                                             \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = MAX_(a[i], b[i]);                                                         \
            break;                                                                                 \
        case RING__OP_BAND:                                                                        \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = (T)((U)a[i] & (U)b[i]);                                                   \
            break;                                                                                 \
        case RING__OP_BOR:                                                                         \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = (T)((U)a[i] | (U)b[i]);                                                   \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

#define DEFINE_FLOAT_REDUCE(name, T)                                                               \
    static void reduce_##name(T *dst, const T *a, const T *b, size_t n, ring_op_t op)              \
    {                                                                                              \
        size_t i;                                                                                  \
        switch (op) {                                                                              \
        case RING_SUM:                                                                             \
        case RING_AVERAGE:                                                                         \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = a[i] + b[i];                                                              \
            break;                                                                                 \
        case RING_PRODUCT:                                                                         \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = a[i] * b[i];                                                              \
            break;                                                                                 \
        case RING_MIN:                                                                             \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = MIN_(a[i], b[i]);                                                         \
            break;                                                                                 \
        case RING_MAX:                                                                             \
            for (i = 0; i < n; i++)                                                                \
                dst[i] = MAX_(a[i], b[i]);                                                         \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

/* 16-bit floats go through a float32 block on the stack, so the float kernel stays the
 * vectorized one and only the conversions are scalar. */
#define DEFINE_HALF_REDUCE(name, to_f, from_f)                                                     \
    static void reduce_##name(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n,       \
                              ring_op_t op)                                                        \
    {                                                                                              \
        float fa[256], fb[256];                                                                    \
        for (size_t base = 0; base < n; base += 256) {                                             \
            size_t m = n - base < 256 ? n - base : 256;                                            \
            for (size_t i = 0; i < m; i++) {                                                       \
                fa[i] = to_f(a[base + i]);                                                         \
                fb[i] = to_f(b[base + i]);                                                         \
            }                                                                                      \
            reduce_f32(fa, fa, fb, m, op);                                                         \
            for (size_t i = 0; i < m; i++)                                                         \
                dst[base + i] = from_f(fa[i]);                                                     \
        }                                                                                          \
    }

DEFINE_INT_REDUCE(u8, uint8_t, uint8_t)
DEFINE_INT_REDUCE(i8, int8_t, uint8_t)
DEFINE_INT_REDUCE(i16, int16_t, uint16_t)
DEFINE_INT_REDUCE(u16, uint16_t, uint16_t)
DEFINE_INT_REDUCE(i32, int32_t, uint32_t)
DEFINE_INT_REDUCE(i64, int64_t, uint64_t)
DEFINE_FLOAT_REDUCE(f32, float)
DEFINE_FLOAT_REDUCE(f64, double)
DEFINE_HALF_REDUCE(f16, ring__half_to_float, ring__float_to_half)
DEFINE_HALF_REDUCE(bf16, ring__bf16_to_float, ring__float_to_bf16)

/* Booleans are bytes of 0 or 1: OR and AND of those are their MAX and MIN. */
static void reduce_bool(uint8_t *dst, const uint8_t *a, const uint8_t *b, size_t n, ring_op_t op)
{
    switch ((int)op) {
    case RING_SUM:
    case RING_MAX:
    case RING__OP_BOR:
        reduce_u8(dst, a, b, n, RING_MAX);
        break;
    case RING_PRODUCT:
    case RING_MIN:
    case RING__OP_BAND:
        reduce_u8(dst, a, b, n, RING_MIN);
        break;
    default:
        break;
    }
}

void ring__reduce(void *dst, const void *a, const void *b, size_t n, ring_dtype_t dtype,
                  ring_op_t op)
{
    switch (dtype) {
    case RING_UINT8:
        reduce_u8(dst, a, b, n, op);
        break;
    case RING_INT8:
        reduce_i8(dst, a, b, n, op);
        break;
    case RING_INT16:
        reduce_i16(dst, a, b, n, op);
        break;
    case RING_UINT16:
        reduce_u16(dst, a, b, n, op);
        break;
    case RING_BOOL:
        reduce_bool(dst, a, b, n, op);
        break;
    case RING_INT32:
        reduce_i32(dst, a, b, n, op);
        break;
    case RING_INT64:
        reduce_i64(dst, a, b, n, op);
        break;
    case RING_FLOAT16:
        reduce_f16(dst, a, b, n, op);
        break;
    case RING_BFLOAT16:
        reduce_bf16(dst, a, b, n, op);
        break;
    case RING_FLOAT32:
        reduce_f32(dst, a, b, n, op);
        break;
    case RING_FLOAT64:
        reduce_f64(dst, a, b, n, op);
        break;
    default:
        break;
    }
}

/* Converts a scaled double back to an integer type, saturating instead of overflowing. */
/*
 * AVERAGE reaches the kernels as a factor 1/n. Multiplying by 1/n, rounded to the type, is
 * off by an ulp from the sum divided by n for some values (2 * 75 / 3 in float); Horovod's
 * tests, and users, compare an average with a true division. So a factor that is exactly
 * the reciprocal of a whole number n (as AVERAGE's is) divides by n; any other factor
 * multiplies, in the type (float factors for float data, as Horovod's scaling does). Returns
 * n, or 0 when the factor is not such a reciprocal.
 */
static double divisor_of(double factor)
{
    double n = factor > 0 && factor < 1 ? rint(1.0 / factor) : 0;
    return n >= 2 && n <= 16777216.0 && 1.0 / n == factor ? n : 0;
}

#define SCALE_INT(T, lo, hi)                                                                       \
    do {                                                                                           \
        const T *s = src;                                                                          \
        T *d = dst;                                                                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            double v = trunc((double)s[i] * factor);                                               \
            d[i] = v <= (double)(lo) ? (T)(lo) : v >= (double)(hi) ? (T)(hi) : (T)v;               \
        }                                                                                          \
    } while (0)

void ring__scale(void *dst, const void *src, size_t n, ring_dtype_t dtype, double factor)
{
    double div = divisor_of(factor);

    if (n == 0) /* buffers of no elements may be NULL (an empty batch's fusion buffer) */
        return;
    if (factor == 1.0) {
        if (dst != src)
            memmove(dst, src, n * ring_dtype_size(dtype));
        return;
    }
    switch (dtype) {
    case RING_UINT8:
        SCALE_INT(uint8_t, 0, UINT8_MAX);
        break;
    case RING_INT8:
        SCALE_INT(int8_t, INT8_MIN, INT8_MAX);
        break;
    case RING_INT16:
        SCALE_INT(int16_t, INT16_MIN, INT16_MAX);
        break;
    case RING_UINT16:
        SCALE_INT(uint16_t, 0, UINT16_MAX);
        break;
    case RING_INT32:
        SCALE_INT(int32_t, INT32_MIN, INT32_MAX);
        break;
    case RING_INT64:
        /* (double)INT64_MAX rounds up to 2^63, so values that would overflow saturate. */
        SCALE_INT(int64_t, INT64_MIN, INT64_MAX);
        break;
    case RING_FLOAT16: {
        const uint16_t *s = src;
        uint16_t *d = dst;
        float f = (float)factor, q = (float)div;
        for (size_t i = 0; i < n; i++)
            d[i] = ring__float_to_half(div != 0 ? ring__half_to_float(s[i]) / q
                                                : ring__half_to_float(s[i]) * f);
        break;
    }
    case RING_BFLOAT16: {
        const uint16_t *s = src;
        uint16_t *d = dst;
        float f = (float)factor, q = (float)div;
        for (size_t i = 0; i < n; i++)
            d[i] = ring__float_to_bf16(div != 0 ? ring__bf16_to_float(s[i]) / q
                                                : ring__bf16_to_float(s[i]) * f);
        break;
    }
    case RING_FLOAT32: {
        const float *s = src;
        float *d = dst;
        float f = (float)factor, q = (float)div;
        if (div != 0)
            for (size_t i = 0; i < n; i++)
                d[i] = s[i] / q;
        else
            for (size_t i = 0; i < n; i++)
                d[i] = s[i] * f;
        break;
    }
    case RING_FLOAT64: {
        const double *s = src;
        double *d = dst;
        if (div != 0)
            for (size_t i = 0; i < n; i++)
                d[i] = s[i] / div;
        else
            for (size_t i = 0; i < n; i++)
                d[i] = s[i] * factor;
        break;
    }
    default:
        break;
    }
}

/*
 * The last step of a reduction that ends in a postscale (AVERAGE's division, or the
 * caller's factor) was two passes over the chunk: reduce into dst, then scale dst: 6% of
 * rank 0's samples in a ResNet-50-shaped step at np 2 (perf). A float sum is done in one
 * loop, (a + b) * f (or / n, see divisor_of): each sum is rounded to the type before it is scaled,
 * as in two passes, and C does not contract a sum and a product into one FMA (that takes a product
 * and a sum), so the result is bitwise the same. Other types and ops run the same two
 * kernels as before, over 4 KiB blocks, so that the scale reads what the reduce just
 * wrote from L1 (4 KiB: a twelfth of a typical 48 KiB L1d, leaving room for the inputs).
 */
#define REDUCE_SCALE_BLOCK 4096

void ring__reduce_scale(void *dst, const void *a, const void *b, size_t n, ring_dtype_t dtype,
                        ring_op_t op, double factor)
{
    size_t es = ring_dtype_size(dtype), step = es > 0 ? REDUCE_SCALE_BLOCK / es : n;
    double div = divisor_of(factor);
    char *d = dst;
    const char *x = a, *y = b;

    if (factor == 1.0 || es == 0) {
        ring__reduce(dst, a, b, n, dtype, op);
        return;
    }
    if ((op == RING_SUM || op == RING_AVERAGE) && dtype == RING_FLOAT32) {
        const float *fa = a, *fb = b;
        float *fd = dst, f = (float)factor, q = (float)div; /* as ring__scale rounds them */
        if (div != 0)
            for (size_t i = 0; i < n; i++)
                fd[i] = (fa[i] + fb[i]) / q;
        else
            for (size_t i = 0; i < n; i++)
                fd[i] = (fa[i] + fb[i]) * f;
        return;
    }
    if ((op == RING_SUM || op == RING_AVERAGE) && dtype == RING_FLOAT64) {
        const double *da = a, *db = b;
        double *dd = dst;
        if (div != 0)
            for (size_t i = 0; i < n; i++)
                dd[i] = (da[i] + db[i]) / div;
        else
            for (size_t i = 0; i < n; i++)
                dd[i] = (da[i] + db[i]) * factor;
        return;
    }
    for (size_t i = 0; i < n; i += step) {
        size_t m = n - i < step ? n - i : step, off = i * es;
        ring__reduce(d + off, x + off, y + off, m, dtype, op);
        ring__scale(d + off, d + off, m, dtype, factor);
    }
}

/* The bytes of one element of value v in dtype: integers saturate at their bounds, floats
 * take infinities as they are. */
static void element_of(void *one, double v, ring_dtype_t dtype)
{
#define SAT(T, lo, hi) (v <= (double)(lo) ? (T)(lo) : v >= (double)(hi) ? (T)(hi) : (T)v)
    switch (dtype) {
    case RING_UINT8:
        *(uint8_t *)one = SAT(uint8_t, 0, UINT8_MAX);
        break;
    case RING_BOOL:
        *(uint8_t *)one = v > 0;
        break;
    case RING_INT8:
        *(int8_t *)one = SAT(int8_t, INT8_MIN, INT8_MAX);
        break;
    case RING_INT16:
        *(int16_t *)one = SAT(int16_t, INT16_MIN, INT16_MAX);
        break;
    case RING_UINT16:
        *(uint16_t *)one = SAT(uint16_t, 0, UINT16_MAX);
        break;
    case RING_INT32:
        *(int32_t *)one = SAT(int32_t, INT32_MIN, INT32_MAX);
        break;
    case RING_INT64:
        /* (double)INT64_MAX rounds up to 2^63: the bounds saturate exactly. */
        *(int64_t *)one = SAT(int64_t, INT64_MIN, INT64_MAX);
        break;
    case RING_FLOAT16:
        *(uint16_t *)one = ring__float_to_half((float)v);
        break;
    case RING_BFLOAT16:
        *(uint16_t *)one = ring__float_to_bf16((float)v);
        break;
    case RING_FLOAT32:
        *(float *)one = (float)v;
        break;
    default:
        *(double *)one = v;
        break;
    }
#undef SAT
}

void ring__neutral(void *buf, size_t n, ring_dtype_t dtype, ring_op_t op)
{
    size_t es = ring_dtype_size((ring_dtype_t)dtype);
    char one[8], *p = buf;
    /* MIN's neutral element is the type's largest value, MAX's its smallest: infinities
     * saturate to the integer types' bounds (and to true and false for BOOL). Adasum's is
     * a zero vector, as SUM's. */
    double v = op == RING_PRODUCT ? 1.0
               : op == RING_MIN   ? HUGE_VAL
               : op == RING_MAX   ? -HUGE_VAL
                                  : 0.0;
    element_of(one, v, dtype);
    for (size_t i = 0; i < n; i++)
        memcpy(p + i * es, one, es);
}

/* ---- Adasum's kernels: dot products and norms in double, then a linear combination ---- */

/* Element i of a float vector of dtype, widened to double. */
static inline double widen(const void *v, size_t i, ring_dtype_t dtype)
{
    switch (dtype) {
    case RING_FLOAT16:
        return ring__half_to_float(((const uint16_t *)v)[i]);
    case RING_BFLOAT16:
        return ring__bf16_to_float(((const uint16_t *)v)[i]);
    case RING_FLOAT32:
        return ((const float *)v)[i];
    default:
        return ((const double *)v)[i];
    }
}

void ring__adasum_partials(const void *a, const void *b, size_t n, ring_dtype_t dtype,
                           double out[3])
{
    double dot = 0, aa = 0, bb = 0;
    if (dtype == RING_FLOAT32) { /* the common case, in a loop the compiler can unroll */
        const float *x = a, *y = b;
        for (size_t i = 0; i < n; i++) {
            double p = x[i], q = y[i];
            dot += p * q;
            aa += p * p;
            bb += q * q;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            double p = widen(a, i, dtype), q = widen(b, i, dtype);
            dot += p * q;
            aa += p * p;
            bb += q * q;
        }
    }
    out[0] = dot;
    out[1] = aa;
    out[2] = bb;
}

void ring__adasum_combine(void *a, const void *b, size_t n, ring_dtype_t dtype, double ca,
                          double cb)
{
    size_t i;
    switch (dtype) {
    case RING_FLOAT16: {
        uint16_t *x = a;
        const uint16_t *y = b;
        for (i = 0; i < n; i++)
            x[i] = ring__float_to_half(
                (float)(ca * ring__half_to_float(x[i]) + cb * ring__half_to_float(y[i])));
        break;
    }
    case RING_BFLOAT16: {
        uint16_t *x = a;
        const uint16_t *y = b;
        for (i = 0; i < n; i++)
            x[i] = ring__float_to_bf16(
                (float)(ca * ring__bf16_to_float(x[i]) + cb * ring__bf16_to_float(y[i])));
        break;
    }
    case RING_FLOAT32: {
        float *x = a;
        const float *y = b;
        for (i = 0; i < n; i++)
            x[i] = (float)(ca * x[i] + cb * y[i]);
        break;
    }
    case RING_FLOAT64: {
        double *x = a;
        const double *y = b;
        for (i = 0; i < n; i++)
            x[i] = ca * x[i] + cb * y[i];
        break;
    }
    default:
        break;
    }
}

/*
 * A vector whose squared norm is below this counts as zero: it keeps its partner whole
 * (coefficient 1) instead of dividing by a norm that has underflowed. 1e-300 is near
 * DBL_MIN (2.2e-308), far below any gradient's squared norm.
 */
#define ADASUM_ZERO_NORMSQ 1e-300

double ring__adasum_coeff(double dot, double normsq)
{
    return normsq < ADASUM_ZERO_NORMSQ ? 1.0 : 1.0 - dot / (2.0 * normsq);
}
