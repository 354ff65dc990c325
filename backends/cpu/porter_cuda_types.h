// porter_cuda_types.h -- CUDA's host-visible vector types and dim3 (porter's own header), shared by
// porter's runtimes that compile a program's host code with g++: the CPU runtime (porter_emu.h) and the
// OpenCL program runtime (backends/opencl/porter_opencl.h).
#ifndef PORTER_CUDA_TYPES_H
#define PORTER_CUDA_TYPES_H

#include <math.h>

#include <type_traits>

#define PORTER_VEC1(T, N, A) \
    struct __attribute__((aligned(A))) N##1 { T x; }; \
    static inline N##1 make_##N##1(T x) { N##1 v; v.x = x; return v; }
#define PORTER_VEC2(T, N, A) \
    struct __attribute__((aligned(A))) N##2 { T x, y; }; \
    static inline N##2 make_##N##2(T x, T y) { N##2 v; v.x = x; v.y = y; return v; }
#define PORTER_VEC3(T, N, A) \
    struct N##3 { T x, y, z; }; \
    static inline N##3 make_##N##3(T x, T y, T z) { N##3 v; v.x = x; v.y = y; v.z = z; return v; }
#define PORTER_VEC4(T, N, A) \
    struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }
#define PORTER_VECS(T, N, S)                                                                          \
    PORTER_VEC1(T, N, S) PORTER_VEC2(T, N, (2 * S > 16 ? 16 : 2 * S)) PORTER_VEC3(T, N, S) \
    PORTER_VEC4(T, N, (4 * S > 16 ? 16 : 4 * S))

PORTER_VECS(signed char, char, 1)
PORTER_VECS(unsigned char, uchar, 1)
PORTER_VECS(short, short, 2)
PORTER_VECS(unsigned short, ushort, 2)
PORTER_VECS(int, int, 4)
PORTER_VECS(unsigned int, uint, 4)
PORTER_VECS(long, long, 8)
PORTER_VECS(unsigned long, ulong, 8)
PORTER_VECS(long long, longlong, 8)
PORTER_VECS(unsigned long long, ulonglong, 8)
PORTER_VECS(float, float, 4)
PORTER_VECS(double, double, 8)

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

// CUDA's min and max, for host and device code alike (nvcc declares them in every unit)
static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
template <class A, class B, class = std::enable_if_t<!std::is_same<A, B>::value>>
static inline std::common_type_t<A, B> min(A a, B b) {
    return min((std::common_type_t<A, B>)a, (std::common_type_t<A, B>)b);
}
template <class A, class B, class = std::enable_if_t<!std::is_same<A, B>::value>>
static inline std::common_type_t<A, B> max(A a, B b) {
    return max((std::common_type_t<A, B>)a, (std::common_type_t<A, B>)b);
}

// Legacy 1-D texture references over linear memory (`texture<T, 1, cudaReadModeElementType> t;`): the bound
// range is the first two words of every reference -- porter_emu.h's tex1Dfetch reads them, porter_opencl.h's
// launches pass them -- and the fields host code sets are kept so those statements build.
enum cudaTextureReadMode { cudaReadModeElementType = 0, cudaReadModeNormalizedFloat = 1 };
enum cudaTextureFilterMode { cudaFilterModePoint = 0, cudaFilterModeLinear = 1 };
enum cudaTextureAddressMode {
    cudaAddressModeWrap = 0, cudaAddressModeClamp = 1, cudaAddressModeMirror = 2, cudaAddressModeBorder = 3
};
enum cudaChannelFormatKind {
    cudaChannelFormatKindSigned = 0, cudaChannelFormatKindUnsigned = 1, cudaChannelFormatKindFloat = 2,
    cudaChannelFormatKindNone = 3
};
struct cudaChannelFormatDesc {
    int x, y, z, w;
    enum cudaChannelFormatKind f;
};
#define cudaTextureType1D 0x01
struct textureReference {
    const void* porter_ptr;  // the bound memory (nullptr: unbound)
    size_t porter_bytes;     // its size in bytes
    int normalized;
    enum cudaTextureFilterMode filterMode;
    enum cudaTextureAddressMode addressMode[3];
    struct cudaChannelFormatDesc channelDesc;
    int sRGB;
    unsigned int maxAnisotropy;
};
template <class T, int dim = 1, enum cudaTextureReadMode mode = cudaReadModeElementType>
struct texture : textureReference {
    constexpr texture(int norm = 0, enum cudaTextureFilterMode f = cudaFilterModePoint,
                      enum cudaTextureAddressMode a = cudaAddressModeClamp)
        : textureReference{nullptr, 0, norm, f, {a, a, a}, {0, 0, 0, 0, cudaChannelFormatKindNone}, 0, 0} {}
};

#endif  // PORTER_CUDA_TYPES_H
