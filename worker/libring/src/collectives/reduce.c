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

#include "ring_internal.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[RING_DTYPE_COUNT] = {
    [RING_UINT8] = {"uint8", 1},     [RING_INT8] = {"int8", 1},
    [RING_INT32] = {"int32", 4},     [RING_INT64] = {"int64", 8},
    [RING_FLOAT16] = {"float16", 2}, [RING_BFLOAT16] = {"bfloat16", 2},
    [RING_FLOAT32] = {"float32", 4}, [RING_FLOAT64] = {"float64", 8},
};

static const char *const op_names[RING_OP_COUNT] = {
    [RING_SUM] = "sum", [RING_AVERAGE] = "average", [RING_MIN] = "min",
    [RING_MAX] = "max", [RING_PRODUCT] = "product",
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

int ring__op_valid(ring_dtype_t dtype, ring_op_t op, double prescale, double postscale)
{
    if ((unsigned)dtype >= RING_DTYPE_COUNT || (unsigned)op >= RING_OP_COUNT)
        return 0;
    if (!isfinite(prescale) || !isfinite(postscale))
        return 0;
    /* Scaling before MIN/MAX would be well defined but is never what a caller means, and
     * Horovod rejects it too; refusing keeps the semantics simple. */
    if ((op == RING_MIN || op == RING_MAX) && (prescale != 1.0 || postscale != 1.0))
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
DEFINE_INT_REDUCE(i32, int32_t, uint32_t)
DEFINE_INT_REDUCE(i64, int64_t, uint64_t)
DEFINE_FLOAT_REDUCE(f32, float)
DEFINE_FLOAT_REDUCE(f64, double)
DEFINE_HALF_REDUCE(f16, ring__half_to_float, ring__float_to_half)
DEFINE_HALF_REDUCE(bf16, ring__bf16_to_float, ring__float_to_bf16)

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
        float f = (float)factor;
        for (size_t i = 0; i < n; i++)
            d[i] = ring__float_to_half(ring__half_to_float(s[i]) * f);
        break;
    }
    case RING_BFLOAT16: {
        const uint16_t *s = src;
        uint16_t *d = dst;
        float f = (float)factor;
        for (size_t i = 0; i < n; i++)
            d[i] = ring__float_to_bf16(ring__bf16_to_float(s[i]) * f);
        break;
    }
    case RING_FLOAT32: {
        const float *s = src;
        float *d = dst;
        float f = (float)factor;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i] * f;
        break;
    }
    case RING_FLOAT64: {
        const double *s = src;
        double *d = dst;
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
 * loop, (a + b) * f: each sum is rounded to the type before it is multiplied, as in two
 * passes, and C does not contract a sum and a product into one FMA (that takes a product
 * and a sum), so the result is bitwise the same. Other types and ops run the same two
 * kernels as before, over 4 KiB blocks, so that the scale reads what the reduce just
 * wrote from L1 (4 KiB: a twelfth of a typical 48 KiB L1d, leaving room for the inputs).
 */
#define REDUCE_SCALE_BLOCK 4096

void ring__reduce_scale(void *dst, const void *a, const void *b, size_t n, ring_dtype_t dtype,
                        ring_op_t op, double factor)
{
    size_t es = ring_dtype_size(dtype), step = es > 0 ? REDUCE_SCALE_BLOCK / es : n;
    char *d = dst;
    const char *x = a, *y = b;

    if (factor == 1.0 || es == 0) {
        ring__reduce(dst, a, b, n, dtype, op);
        return;
    }
    if ((op == RING_SUM || op == RING_AVERAGE) && dtype == RING_FLOAT32) {
        const float *fa = a, *fb = b;
        float *fd = dst, f = (float)factor; /* as ring__scale rounds it */
        for (size_t i = 0; i < n; i++)
            fd[i] = (fa[i] + fb[i]) * f;
        return;
    }
    if ((op == RING_SUM || op == RING_AVERAGE) && dtype == RING_FLOAT64) {
        const double *da = a, *db = b;
        double *dd = dst;
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

void ring__neutral(void *buf, size_t n, ring_dtype_t dtype, ring_op_t op)
{
    size_t es = ring_dtype_size((ring_dtype_t)dtype);
    char one[8], *p = buf;
    double v = op == RING_PRODUCT ? 1.0 : 0.0;

    if (op == RING_MIN || op == RING_MAX) {
        static const double big[RING_DTYPE_COUNT] = {
            [RING_UINT8] = 255,         [RING_INT8] = 127,          [RING_INT32] = 2147483647.0,
            [RING_INT64] = 9.2e18,      [RING_FLOAT16] = 1.0 / 0.0, [RING_BFLOAT16] = 1.0 / 0.0,
            [RING_FLOAT32] = 1.0 / 0.0, [RING_FLOAT64] = 1.0 / 0.0,
        };
        v = op == RING_MIN ? big[dtype]
                           : (dtype == RING_UINT8 ? 0 : -big[dtype] - (dtype < RING_FLOAT16));
    }
    switch (dtype) {
    case RING_UINT8:
        *(uint8_t *)one = (uint8_t)v;
        break;
    case RING_INT8:
        *(int8_t *)one = (int8_t)v;
        break;
    case RING_INT32:
        *(int32_t *)one = (int32_t)v;
        break;
    case RING_INT64:
        *(int64_t *)one = v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
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
    for (size_t i = 0; i < n; i++)
        memcpy(p + i * es, one, es);
}
