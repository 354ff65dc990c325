// porter_fp16.h -- half precision and bfloat16 for the CPU emulator: what cuda_fp16.h / cuda_bf16.h /
// hip/hip_fp16.h / hip/hip_bf16.h give device code, computed bit-exactly on the host.
//
// A __half holds IEEE binary16 bits; a __nv_bfloat16 the upper half of a binary32.  Conversions from float
// round to nearest, ties to even (as __float2half_rn / __float2bfloat16_rn do on a GPU), with subnormals,
// infinities and NaN; arithmetic converts to float, computes there and rounds back -- the result of one
// half-precision operation on a GPU (each op rounds once), so an fp16 kernel's error on the emulator is
// the one it has on a device.  Included through porter's stubs of those headers (dialect.toml).
#ifndef PORTER_FP16_H
#define PORTER_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <limits>
#include <type_traits>

namespace porter_fp16 {
inline uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

inline uint16_t to_half(float f) {
    uint32_t x = bits_of(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) return (uint16_t)(sign | (mag > 0x7f800000u ? 0x7e00u : 0x7c00u));  // NaN, inf
    if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds past 65504: inf
    if (mag < 0x38800000u) {  // a half subnormal (or zero): align the significand to 2^-24 units
        if (mag < 0x33000000u) return (uint16_t)sign;  // below half of the smallest subnormal
        uint32_t exp = mag >> 23, sig = (mag & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp;  // 2^-24 units: sig * 2^(exp-127-23) / 2^-24
        uint32_t q = sig >> shift, rest = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (q & 1u))) ++q;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((mag >> 13) - (112u << 10));  // rebias 127 -> 15
    uint32_t rest = mag & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (q & 1u))) ++q;
    return (uint16_t)(sign | q);
}

// Double to binary16, rounded once (to nearest even, or toward zero / down / up): no double rounding through
// float.  mode: 0 nearest even, 1 toward zero, 2 down, 3 up.
inline uint16_t to_half_d(double d, int mode = 0) {
    uint64_t x;
    memcpy(&x, &d, 8);
    uint16_t sign = (uint16_t)((x >> 48) & 0x8000u);
    uint64_t mag = x & 0x7fffffffffffffffull;
    bool neg = sign != 0;
    if (mag > 0x7ff0000000000000ull) return (uint16_t)(sign | 0x7e00u);  // NaN
    bool up = (mode == 3 && !neg) || (mode == 2 && neg);  // directed away from zero; else truncated
    if (mag == 0x7ff0000000000000ull) return (uint16_t)(sign | 0x7c00u);
    int exp = (int)(mag >> 52) - 1023;
    uint64_t sig = (mag & 0xfffffffffffffull) | (exp > -1023 ? 0x10000000000000ull : 0);
    if (exp == -1023) exp = -1022;
    // the value is sig * 2^(exp-52); binary16 keeps units of 2^(e-10) for e >= -14, else 2^-24
    int unit = exp < -14 ? -24 : exp - 10;
    int shift = (52 - exp) + unit;  // bits of sig below the kept unit
    if (shift >= 54) return (uint16_t)(sign | ((up && sig != 0) ? 1u : 0u));  // below half a unit (sig < 2^53)
    uint64_t q = sig >> shift, rest = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);  // shift >= 42
    if (mode == 0) {
        if (rest > half || (rest == half && (q & 1u))) ++q;
    } else if (up && rest) {
        ++q;
    }
    // q is the significand in units of 2^unit; assemble (a carry into the next binade works out)
    uint32_t bits;
    if (unit == -24) {
        bits = (uint32_t)q;  // subnormal (q may reach 0x400: the smallest normal)
    } else {
        uint32_t e = (uint32_t)(exp + 15);
        bits = (e << 10) + (uint32_t)(q - 0x400u);  // q in [0x400, 0x800]: 0x800 carries into the exponent
    }
    if (bits >= 0x7c00u) {  // overflow: infinity, or the largest finite value when rounding toward it
        bool to_inf = mode == 0 || up;
        return (uint16_t)(sign | (to_inf ? 0x7c00u : 0x7bffu));
    }
    return (uint16_t)(sign | bits);
}

inline float from_half(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, sig = h & 0x3ffu;
    if (exp == 0x1fu) return float_of(sign | 0x7f800000u | (sig << 13));
    if (exp == 0) {
        if (sig == 0) return float_of(sign);
        float v = (float)sig * (1.0f / 16777216.0f);  // sig * 2^-24, exact
        return sign ? -v : v;
    }
    return float_of(sign | ((exp + 112u) << 23) | (sig << 13));
}

inline uint16_t to_bf16(float f) {
    uint32_t x = bits_of(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // a quiet NaN
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);  // to nearest, ties to even
    return (uint16_t)((x + rounding) >> 16);
}

inline float from_bf16(uint16_t b) { return float_of((uint32_t)b << 16); }
}  // namespace porter_fp16

struct __half_raw {
    unsigned short x;
};
struct __half2_raw {
    unsigned short x, y;
};
struct __half {
    uint16_t __x;
    __half() = default;
    __half(float f) : __x(porter_fp16::to_half(f)) {}
    __half(double d) : __x(porter_fp16::to_half_d(d)) {}
    template <class I, class = std::enable_if_t<std::is_integral<I>::value>>
    __half(I i) : __x(porter_fp16::to_half_d((double)i)) {}
    __half(const __half_raw& r) : __x(r.x) {}
    __half& operator=(const __half_raw& r) { __x = r.x; return *this; }
    operator __half_raw() const { return __half_raw{__x}; }
    operator float() const { return porter_fp16::from_half(__x); }
    __half& operator+=(const __half& o) { *this = __half((float)*this + (float)o); return *this; }
    __half& operator-=(const __half& o) { *this = __half((float)*this - (float)o); return *this; }
    __half& operator*=(const __half& o) { *this = __half((float)*this * (float)o); return *this; }
    __half& operator/=(const __half& o) { *this = __half((float)*this / (float)o); return *this; }
};
inline __half operator+(__half a, __half b) { return __half((float)a + (float)b); }
inline __half operator-(__half a, __half b) { return __half((float)a - (float)b); }
inline __half operator*(__half a, __half b) { return __half((float)a * (float)b); }
inline __half operator/(__half a, __half b) { return __half((float)a / (float)b); }
inline __half operator-(__half a) { __half r; r.__x = (uint16_t)(a.__x ^ 0x8000u); return r; }
inline __half operator+(__half a) { return a; }
inline __half& operator++(__half& a) { return a = a + __half(1.0f); }
inline __half& operator--(__half& a) { return a = a - __half(1.0f); }
inline __half operator++(__half& a, int) { __half old = a; ++a; return old; }
inline __half operator--(__half& a, int) { __half old = a; --a; return old; }
// (comparisons of two halves: through the conversion to float, exact)
typedef __half half;

struct __half2 {
    __half x, y;
    __half2() = default;
    __half2(__half a, __half b) : x(a), y(b) {}
    __half2(const __half2_raw& r) { x.__x = r.x; y.__x = r.y; }
    __half2& operator=(const __half2_raw& r) { x.__x = r.x; y.__x = r.y; return *this; }
    operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
    __half2& operator+=(const __half2& o) { x += o.x; y += o.y; return *this; }
    __half2& operator-=(const __half2& o) { x -= o.x; y -= o.y; return *this; }
    __half2& operator*=(const __half2& o) { x *= o.x; y *= o.y; return *this; }
    __half2& operator/=(const __half2& o) { x /= o.x; y /= o.y; return *this; }
};
typedef __half2 half2;
inline __half2 operator+(__half2 a, __half2 b) { return __half2(a.x + b.x, a.y + b.y); }
inline __half2 operator-(__half2 a, __half2 b) { return __half2(a.x - b.x, a.y - b.y); }
inline __half2 operator*(__half2 a, __half2 b) { return __half2(a.x * b.x, a.y * b.y); }
inline __half2 operator/(__half2 a, __half2 b) { return __half2(a.x / b.x, a.y / b.y); }
inline __half2 operator-(__half2 a) { return __half2(-a.x, -a.y); }
inline __half2 operator+(__half2 a) { return a; }
inline bool operator==(__half2 a, __half2 b) { return a.x == b.x && a.y == b.y; }
inline bool operator!=(__half2 a, __half2 b) { return a.x != b.x && a.y != b.y; }  // as cuda_fp16: both lanes
inline bool operator<(__half2 a, __half2 b) { return a.x < b.x && a.y < b.y; }
inline bool operator<=(__half2 a, __half2 b) { return a.x <= b.x && a.y <= b.y; }
inline bool operator>(__half2 a, __half2 b) { return a.x > b.x && a.y > b.y; }
inline bool operator>=(__half2 a, __half2 b) { return a.x >= b.x && a.y >= b.y; }

inline __half __float2half(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(d); }
#define PORTER_HALF_FROM(NAME, T)                                                                            \
    inline __half NAME##_rn(T v) { __half h; h.__x = porter_fp16::to_half_d((double)v, 0); return h; }     \
    inline __half NAME##_rz(T v) { __half h; h.__x = porter_fp16::to_half_d((double)v, 1); return h; }     \
    inline __half NAME##_rd(T v) { __half h; h.__x = porter_fp16::to_half_d((double)v, 2); return h; }     \
    inline __half NAME##_ru(T v) { __half h; h.__x = porter_fp16::to_half_d((double)v, 3); return h; }
PORTER_HALF_FROM(__float2half, float)
PORTER_HALF_FROM(__int2half, int)
PORTER_HALF_FROM(__uint2half, unsigned int)
PORTER_HALF_FROM(__short2half, short)
PORTER_HALF_FROM(__ushort2half, unsigned short)
PORTER_HALF_FROM(__ll2half, long long)
PORTER_HALF_FROM(__ull2half, unsigned long long)
// Half to integer: rounded as named, clamped to the integer's range, NaN to 0.
namespace porter_fp16 {
template <class I>
inline I to_int(double v) {
    if (v != v) return 0;
    if (v <= (double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (v >= (double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)v;
}
}  // namespace porter_fp16
#define PORTER_HALF_TO(NAME, T)                                                                              \
    inline T NAME##_rn(__half h) { return porter_fp16::to_int<T>(rint((double)(float)h)); }                 \
    inline T NAME##_rz(__half h) { return porter_fp16::to_int<T>(trunc((double)(float)h)); }                \
    inline T NAME##_rd(__half h) { return porter_fp16::to_int<T>(floor((double)(float)h)); }                \
    inline T NAME##_ru(__half h) { return porter_fp16::to_int<T>(ceil((double)(float)h)); }
PORTER_HALF_TO(__half2int, int)
PORTER_HALF_TO(__half2uint, unsigned int)
PORTER_HALF_TO(__half2short, short)
PORTER_HALF_TO(__half2ushort, unsigned short)
PORTER_HALF_TO(__half2ll, long long)
PORTER_HALF_TO(__half2ull, unsigned long long)
inline short __half_as_short(__half h) { return (short)h.__x; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __short_as_half(short s) { __half h; h.__x = (uint16_t)s; return h; }
inline __half __ushort_as_half(unsigned short s) { __half h; h.__x = s; return h; }
inline __half __double2half_rn(double d) { return __half(d); }
inline float __half2float(__half h) { return (float)h; }
inline __half __hadd(__half a, __half b) { return a + b; }
inline __half __hsub(__half a, __half b) { return a - b; }
inline __half __hmul(__half a, __half b) { return a * b; }
inline __half __hdiv(__half a, __half b) { return a / b; }
inline __half __hneg(__half a) { return -a; }
inline __half __habs(__half a) { __half r; r.__x = (uint16_t)(a.__x & 0x7fffu); return r; }
namespace porter_fp16 {
// a*b+c rounded once to binary16: the product is exact in double; the sum is rounded to odd in double
// (53 bits, more than 11 + 2), after which one rounding to nearest even is the correctly rounded result.
inline double sum_to_odd(double p, double c) {
    double s = p + c;
    if (!isfinite(s)) return s;
    double bb = s - p;
    double err = (p - (s - bb)) + (c - bb);
    uint64_t u;
    memcpy(&u, &s, 8);
    if (err != 0 && (u & 1u) == 0) s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
    return s;
}
inline __half fma_half(__half a, __half b, __half c) {
    __half r;
    r.__x = to_half_d(sum_to_odd((double)(float)a * (double)(float)b, (double)(float)c));
    return r;
}
inline __half clamp01(__half h) {  // _sat: clamp to [0, 1], NaN to 0
    float f = (float)h;
    return f != f ? __half(0.0f) : (f < 0.0f ? __half(0.0f) : (f > 1.0f ? __half(1.0f) : h));
}
}  // namespace porter_fp16
inline __half __hfma(__half a, __half b, __half c) { return porter_fp16::fma_half(a, b, c); }
inline __half __hfma_sat(__half a, __half b, __half c) { return porter_fp16::clamp01(__hfma(a, b, c)); }
inline __half __hfma_relu(__half a, __half b, __half c) {
    __half r = __hfma(a, b, c);
    return ((r.__x & 0x7fffu) > 0x7c00u) ? r : ((float)r < 0.0f ? __half(0.0f) : r);
}
inline __half __hadd_sat(__half a, __half b) { return porter_fp16::clamp01(a + b); }
inline __half __hsub_sat(__half a, __half b) { return porter_fp16::clamp01(a - b); }
inline __half __hmul_sat(__half a, __half b) { return porter_fp16::clamp01(a * b); }
inline __half __hadd_rn(__half a, __half b) { return a + b; }
inline __half __hsub_rn(__half a, __half b) { return a - b; }
inline __half __hmul_rn(__half a, __half b) { return a * b; }
inline bool __heq(__half a, __half b) { return (float)a == (float)b; }
inline bool __hne(__half a, __half b) { return (float)a != (float)b; }
inline bool __hlt(__half a, __half b) { return (float)a < (float)b; }
inline bool __hle(__half a, __half b) { return (float)a <= (float)b; }
inline bool __hgt(__half a, __half b) { return (float)a > (float)b; }
inline bool __hge(__half a, __half b) { return (float)a >= (float)b; }
inline __half __hmax(__half a, __half b) { return (float)a >= (float)b ? a : b; }
inline __half __hmin(__half a, __half b) { return (float)a <= (float)b ? a : b; }
inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline __half __low2half(__half2 v) { return v.x; }
inline __half __high2half(__half2 v) { return v.y; }
inline float __low2float(__half2 v) { return (float)v.x; }
inline float __high2float(__half2 v) { return (float)v.y; }
inline __half2 __hadd2(__half2 a, __half2 b) { return __half2{a.x + b.x, a.y + b.y}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2{a.x * b.x, a.y * b.y}; }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }
inline __half2 __hsub2(__half2 a, __half2 b) { return a - b; }
inline __half2 __h2div(__half2 a, __half2 b) { return a / b; }
inline __half2 __hdiv2(__half2 a, __half2 b) { return a / b; }
inline __half2 __hmul2_rn(__half2 a, __half2 b) { return a * b; }
inline __half2 __hadd2_rn(__half2 a, __half2 b) { return a + b; }
inline __half2 __hsub2_rn(__half2 a, __half2 b) { return a - b; }
inline __half2 __hneg2(__half2 a) { return -a; }
inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
inline __half2 __hadd2_sat(__half2 a, __half2 b) { return __half2(__hadd_sat(a.x, b.x), __hadd_sat(a.y, b.y)); }
inline __half2 __hsub2_sat(__half2 a, __half2 b) { return __half2(__hsub_sat(a.x, b.x), __hsub_sat(a.y, b.y)); }
inline __half2 __hmul2_sat(__half2 a, __half2 b) { return __half2(__hmul_sat(a.x, b.x), __hmul_sat(a.y, b.y)); }
inline __half2 __hfma2_sat(__half2 a, __half2 b, __half2 c) {
    return __half2(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y));
}
inline __half2 __hfma2_relu(__half2 a, __half2 b, __half2 c) {
    return __half2(__hfma_relu(a.x, b.x, c.x), __hfma_relu(a.y, b.y, c.y));
}
inline __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
inline __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
inline __half2 __half2half2(__half a) { return __half2(a, a); }
inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
inline __half2 make_half2(__half x, __half y) { return __half2(x, y); }
inline __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
inline bool __hisnan2_any(__half2 a) { return __hisnan(a.x) || __hisnan(a.y); }
inline __half2 __hisnan2(__half2 a) { return __half2(__half(__hisnan(a.x) ? 1.0f : 0.0f), __half(__hisnan(a.y) ? 1.0f : 0.0f)); }
inline int __hisinf(__half a) { return a.__x == 0x7c00u ? 1 : (a.__x == 0xfc00u ? -1 : 0); }
// Lane-wise comparisons: 1.0 or 0.0 per lane (__heq2 ...), or true when both lanes hold (__hbeq2 ...).
#define PORTER_HALF2_CMP(NAME, OP)                                                                           \
    inline __half2 __h##NAME##2(__half2 a, __half2 b) {                                                     \
        return __half2(__half((float)a.x OP (float)b.x ? 1.0f : 0.0f), __half((float)a.y OP (float)b.y ? 1.0f : 0.0f)); \
    }                                                                                                        \
    inline bool __hb##NAME##2(__half2 a, __half2 b) { return ((float)a.x OP (float)b.x) && ((float)a.y OP (float)b.y); }
PORTER_HALF2_CMP(eq, ==)
PORTER_HALF2_CMP(ne, !=)
PORTER_HALF2_CMP(lt, <)
PORTER_HALF2_CMP(le, <=)
PORTER_HALF2_CMP(gt, >)
PORTER_HALF2_CMP(ge, >=)
inline __half __hmax_nan(__half a, __half b) { return __hisnan(a) ? a : (__hisnan(b) ? b : __hmax(a, b)); }
inline __half __hmin_nan(__half a, __half b) { return __hisnan(a) ? a : (__hisnan(b) ? b : __hmin(a, b)); }
// Half-precision math: computed in float, rounded once to half (the GPU's hsqrt etc. are within an ulp).
#define PORTER_HALF_MATH(NAME, EXPR)                                                                         \
    inline __half NAME(__half h) { float x = (float)h; return __half((float)(EXPR)); }                      \
    inline __half2 NAME##2(__half2 h) { return __half2(NAME(h.x), NAME(h.y)); }
PORTER_HALF_MATH(hsqrt, sqrtf(x))
PORTER_HALF_MATH(hrsqrt, 1.0f / sqrtf(x))
PORTER_HALF_MATH(hrcp, 1.0f / x)
PORTER_HALF_MATH(hexp, expf(x))
PORTER_HALF_MATH(hexp2, exp2f(x))
PORTER_HALF_MATH(hexp10, exp10f(x))
PORTER_HALF_MATH(hlog, logf(x))
PORTER_HALF_MATH(hlog2, log2f(x))
PORTER_HALF_MATH(hlog10, log10f(x))
PORTER_HALF_MATH(hsin, sinf(x))
PORTER_HALF_MATH(hcos, cosf(x))
PORTER_HALF_MATH(htanh, tanhf(x))
PORTER_HALF_MATH(hceil, ceilf(x))
PORTER_HALF_MATH(hfloor, floorf(x))
PORTER_HALF_MATH(htrunc, truncf(x))
PORTER_HALF_MATH(hrint, rintf(x))
// Atomic adds on half storage (one emulated thread runs at a time).
inline __half atomicAdd(__half* p, __half v) { __half old = *p; *p = old + v; return old; }
inline __half2 atomicAdd(__half2* p, __half2 v) { __half2 old = *p; *p = old + v; return old; }

struct __nv_bfloat16 {
    uint16_t __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(porter_fp16::to_bf16(f)) {}
    __nv_bfloat16(double d) : __x(porter_fp16::to_bf16((float)d)) {}
    __nv_bfloat16(int i) : __x(porter_fp16::to_bf16((float)i)) {}
    operator float() const { return porter_fp16::from_bf16(__x); }
    __nv_bfloat16& operator+=(const __nv_bfloat16& o) { *this = __nv_bfloat16((float)*this + (float)o); return *this; }
    __nv_bfloat16& operator*=(const __nv_bfloat16& o) { *this = __nv_bfloat16((float)*this * (float)o); return *this; }
};
inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a + (float)b); }
inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a - (float)b); }
inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a * (float)b); }
inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a / (float)b); }
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat16 hip_bfloat16;
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }

#endif  // PORTER_FP16_H
