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

#include <stdint.h>
#include <string.h>

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

struct __half {
    uint16_t __x;
    __half() = default;
    __half(float f) : __x(porter_fp16::to_half(f)) {}
    __half(double d) : __x(porter_fp16::to_half((float)d)) {}
    __half(int i) : __x(porter_fp16::to_half((float)i)) {}
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
typedef __half half;

struct __half2 {
    __half x, y;
};
typedef __half2 half2;

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half((float)d); }
inline __half __int2half_rn(int i) { return __half((float)i); }
inline float __half2float(__half h) { return (float)h; }
inline int __half2int_rz(__half h) { return (int)(float)h; }
inline __half __hadd(__half a, __half b) { return a + b; }
inline __half __hsub(__half a, __half b) { return a - b; }
inline __half __hmul(__half a, __half b) { return a * b; }
inline __half __hdiv(__half a, __half b) { return a / b; }
inline __half __hneg(__half a) { return -a; }
inline __half __habs(__half a) { __half r; r.__x = (uint16_t)(a.__x & 0x7fffu); return r; }
inline __half __hfma(__half a, __half b, __half c) { return __half((float)a * (float)b + (float)c); }
inline bool __heq(__half a, __half b) { return (float)a == (float)b; }
inline bool __hne(__half a, __half b) { return (float)a != (float)b; }
inline bool __hlt(__half a, __half b) { return (float)a < (float)b; }
inline bool __hle(__half a, __half b) { return (float)a <= (float)b; }
inline bool __hgt(__half a, __half b) { return (float)a > (float)b; }
inline bool __hge(__half a, __half b) { return (float)a >= (float)b; }
inline __half __hmax(__half a, __half b) { return (float)a >= (float)b ? a : b; }
inline __half __hmin(__half a, __half b) { return (float)a <= (float)b ? a : b; }
inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline __half __low2half(__half2 v) { return v.x; }
inline __half __high2half(__half2 v) { return v.y; }
inline float __low2float(__half2 v) { return (float)v.x; }
inline float __high2float(__half2 v) { return (float)v.y; }
inline __half2 __hadd2(__half2 a, __half2 b) { return __half2{a.x + b.x, a.y + b.y}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2{a.x * b.x, a.y * b.y}; }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }

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
