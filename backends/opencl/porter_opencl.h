// porter_opencl.h -- the runtime of porter's OpenCL programs (porter's own header).
//
// `porter port DIR --to opencl` writes an OpenCL program: each unit's kernels as OpenCL C (`unit.cl`)
// and the program's host code as written, except that each kernel's body is replaced by a host stub that
// enqueues the kernel's OpenCL translation (`porter_opencl::Launch`), and its __device__ functions are
// gone.  The host code keeps calling the CUDA runtime API; this header serves that API over OpenCL 1.2:
//
//   * one context and one in-order queue on the device chosen by PORTER_OPENCL_PLATFORM and
//     PORTER_OPENCL_DEVICE (an index or a part of the name; default: the first device of the first
//     platform that has one), a queue more per cudaStream_t;
//   * cudaMalloc makes a cl_mem buffer and returns an address of porter's own: never dereferenceable on
//     the host (as device memory is not), but pointer arithmetic works as on the GPU -- a kernel argument
//     that points into an allocation becomes a sub-buffer at that offset (OpenCL requires the offset to be
//     a multiple of the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN; at any other offset the kernel works on a
//     copy of the allocation's rest, copied back after it -- refused when the launch passes the same
//     allocation twice, as the copy would hide one argument's writes from the other);
//   * copies, memset (clEnqueueFillBuffer), __constant__ symbols (the host variable of the same name
//     holds the bytes cudaMemcpyToSymbol wrote; a launch passes them as a __constant buffer), streams,
//     events (timed on the host clock after the stream's queue finished), errors;
//   * 1-D texture references over linear memory: cudaBindTexture records the pointer and size bound to one;
//     a launch of a kernel reading it passes them (its OpenCL C takes the memory and the element count);
//   * the kernels' OpenCL C is built once per program source from the copies embedded at build time
//     (porter_opencl_sources.h), or read from the folder PORTER_OPENCL_SOURCES names.  A build failure
//     prints the compiler's log and ends the program (exit 3).
//
// The OpenCL API is reached through the ICD loader opened at run time (libOpenCL.so.1, or
// PORTER_OPENCL_LIBRARY): no OpenCL headers or link-time library are needed to build.  Launch order
// follows CUDA's legacy default stream: work on the default stream waits for every stream, work on a
// stream waits for the default stream, copies wait for everything.  Documented in docs/OPENCL_PROGRAMS.md.
#ifndef PORTER_OPENCL_H
#define PORTER_OPENCL_H

#ifndef PORTER_PROGRAM
#define PORTER_PROGRAM 1
#endif
#define PORTER_OPENCL_RUNTIME 1

#include <assert.h>
#include <dlfcn.h>
#include <float.h>
#include <limits.h>
#include <math.h>  // nvcc's runtime header brings the math library into every unit
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
// (no <unistd.h>: a program may ship its own -- Rodinia's kmeans has a Windows shim of that name beside its
// sources, found first through the program's -I -- so the cache's temporary file comes from mkstemp/fdopen)

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// what is left of device code in the host units: qualifiers (the stubs keep the kernels' signatures)
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif

#include "porter_cuda_types.h"
#include "porter_runtime_data.h"
#include "porter_runtime_c.h"  // cudaMemcpyKind
#include "porter_runtime_types.h"

// what the host side of a unit using cooperative groups still names (`namespace cg = cooperative_groups;`):
// the groups themselves lived in device code, now OpenCL C
namespace cooperative_groups {}

// --------------------------------------------------------------------------- texture references
// Legacy 1-D texture references over linear memory (`texture<T, 1, cudaReadModeElementType> t;`, bound with
// cudaBindTexture, read with tex1Dfetch): the host keeps what is bound -- a device pointer and the bytes from
// it -- and each launch of a kernel reading the texture passes that memory and its element count
// (Launch::texref, texref_size); the kernel's fetch is a plain load, zero outside the bound range.  The
// fields host code sets (filterMode, normalized, addressMode, channelDesc) are kept so those statements
// build; tex1Dfetch ignores them.  The types are porter_cuda_types.h's (included above), shared with porter's
// CPU runtime.

#define PORTER_DEDUCED_LAUNCH(...) __VA_ARGS__
#include "porter_capture.h"  // the launch interface porter's rewrite calls, the symbol registry

// --------------------------------------------------------------------------- the OpenCL C API (1.2)

namespace porter_cl {
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef struct _cl_platform_id* cl_platform_id;
typedef struct _cl_device_id* cl_device_id;
typedef struct _cl_context* cl_context;
typedef struct _cl_command_queue* cl_command_queue;
typedef struct _cl_mem* cl_mem;
typedef struct _cl_program* cl_program;
typedef struct _cl_kernel* cl_kernel;
typedef struct _cl_event* cl_event;
struct cl_buffer_region {
    size_t origin, size;
};

enum : cl_int { CL_SUCCESS = 0, CL_BUILD_PROGRAM_FAILURE = -11, CL_MISALIGNED_SUB_BUFFER_OFFSET = -13 };
enum : cl_uint {
    CL_FALSE = 0,
    CL_TRUE = 1,
    CL_PLATFORM_VERSION = 0x0901,
    CL_PLATFORM_NAME = 0x0902,
    CL_DEVICE_TYPE = 0x1000,
    CL_DEVICE_MAX_COMPUTE_UNITS = 0x1002,
    CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004,
    CL_DEVICE_MAX_WORK_ITEM_SIZES = 0x1005,
    CL_DEVICE_MAX_CLOCK_FREQUENCY = 0x100C,
    CL_DEVICE_MEM_BASE_ADDR_ALIGN = 0x1019,
    CL_DEVICE_GLOBAL_MEM_SIZE = 0x101F,
    CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE = 0x1020,
    CL_DEVICE_LOCAL_MEM_SIZE = 0x1023,
    CL_DEVICE_NAME = 0x102B,
    CL_DEVICE_VENDOR = 0x102C,
    CL_DEVICE_EXTENSIONS = 0x1030,
    CL_DRIVER_VERSION = 0x102D,
    CL_DEVICE_VERSION = 0x102F,
    CL_DEVICE_OPENCL_C_VERSION = 0x103D,
    CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV = 0x4000,  // cl_nv_device_attribute_query
    CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV = 0x4001,
    CL_PROGRAM_BINARY_SIZES = 0x1165,
    CL_PROGRAM_BINARIES = 0x1166,
    CL_PROGRAM_BUILD_LOG = 0x1183,
    CL_BUFFER_CREATE_TYPE_REGION = 0x1220,
};
const cl_bitfield CL_DEVICE_TYPE_ALL = 0xFFFFFFFF;
const cl_bitfield CL_MEM_READ_WRITE = 1;

struct Api {
    cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id*, cl_uint*);
    cl_int (*GetPlatformInfo)(cl_platform_id, cl_uint, size_t, void*, size_t*);
    cl_int (*GetDeviceIDs)(cl_platform_id, cl_bitfield, cl_uint, cl_device_id*, cl_uint*);
    cl_int (*GetDeviceInfo)(cl_device_id, cl_uint, size_t, void*, size_t*);
    cl_context (*CreateContext)(const intptr_t*, cl_uint, const cl_device_id*,
                                void (*)(const char*, const void*, size_t, void*), void*, cl_int*);
    cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_bitfield, cl_int*);
    cl_int (*ReleaseCommandQueue)(cl_command_queue);
    cl_mem (*CreateBuffer)(cl_context, cl_bitfield, size_t, void*, cl_int*);
    cl_mem (*CreateSubBuffer)(cl_mem, cl_bitfield, cl_uint, const void*, cl_int*);
    cl_int (*ReleaseMemObject)(cl_mem);
    cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char**, const size_t*, cl_int*);
    cl_program (*CreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id*, const size_t*,
                                          const unsigned char**, cl_int*, cl_int*);
    cl_int (*GetProgramInfo)(cl_program, cl_uint, size_t, void*, size_t*);
    cl_int (*ReleaseProgram)(cl_program);
    cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id*, const char*, void (*)(cl_program, void*),
                           void*);
    cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_uint, size_t, void*, size_t*);
    cl_kernel (*CreateKernel)(cl_program, const char*, cl_int*);
    cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void*);
    cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t*, const size_t*,
                                   const size_t*, cl_uint, const cl_event*, cl_event*);
    cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void*, cl_uint,
                                const cl_event*, cl_event*);
    cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void*, cl_uint,
                                 const cl_event*, cl_event*);
    cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                                const cl_event*, cl_event*);
    cl_int (*EnqueueFillBuffer)(cl_command_queue, cl_mem, const void*, size_t, size_t, size_t, cl_uint,
                                const cl_event*, cl_event*);
    cl_int (*Finish)(cl_command_queue);
};
}  // namespace porter_cl

// --------------------------------------------------------------------------- the runtime's state

namespace porter_opencl __attribute__((visibility("hidden"))) {
using namespace porter_cl;

struct Source {
    const char* path;     // the .cl file, relative to the port's tree ("src/main.cl")
    const char* text;     // its OpenCL C
    const char* options;  // its build options (the unit's -D)
};
}  // namespace porter_opencl

#if __has_include("porter_opencl_sources.h")
#include "porter_opencl_sources.h"  // generated by the build: every .cl of the port, embedded
#else
namespace porter_opencl __attribute__((visibility("hidden"))) {
inline const Source porter_opencl_sources[1] = {{"", "", ""}};
inline const size_t porter_opencl_source_count = 0;
inline const char porter_native_math_define[] = "";
inline const cl_bitfield porter_native_math_types = 0;
inline const char* const porter_native_math_vendors[1] = {""};
inline const size_t porter_native_math_vendor_count = 0;
inline const char porter_ptx_subgroups_define[] = "";
inline const cl_bitfield porter_ptx_subgroups_types = 0;
inline const char* const porter_ptx_subgroups_vendors[1] = {""};
inline const size_t porter_ptx_subgroups_vendor_count = 0;
}  // namespace porter_opencl
#endif

struct porter_stream {
    porter_cl::cl_command_queue queue;
};
struct porter_event {
    double ms;
    int recorded;
};

namespace porter_opencl __attribute__((visibility("hidden"))) {

[[noreturn]] inline void die(const char* what) {
    fprintf(stderr, "porter opencl runtime: %s\n", what);
    fflush(stderr);
    exit(3);
}

// Exit status of a port that cannot run on this device (a kernel it launches needs what the device's OpenCL
// lacks): porter reports the run not-run on that device, with the line printed, not as a difference.
constexpr int UNAVAILABLE_EXIT = 4;
[[noreturn]] inline void unavailable(const std::string& what) {
    fprintf(stderr, "porter opencl runtime: not run on this device: %s\n", what.c_str());
    fflush(stderr);
    exit(UNAVAILABLE_EXIT);
}

// The condition of the requirement guard (`#if (defined(cl_khr_subgroups) ...)` ... `#endif /* cond */`) the
// translation put around kernel `entry` in `text`, "" when it has none: what this device lacks if the kernel
// did not build.
inline std::string guard_of(const std::string& text, const char* entry) {
    std::string head = std::string(" ") + entry + "(";
    size_t at = text.find(head);
    if (at == std::string::npos) return "";
    size_t line = text.rfind("\n#if ", at);
    if (line == std::string::npos) return "";
    size_t end = text.find('\n', line + 1);
    std::string cond = text.substr(line + 5, end - line - 5);
    if (text.find("#endif /* " + cond + " */", at) == std::string::npos) return "";
    return cond;
}

inline Api& api() {
    static Api a = [] {
        Api f{};
        const char* named = getenv("PORTER_OPENCL_LIBRARY");
        void* lib = dlopen(named && *named ? named : "libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr && !(named && *named)) lib = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            std::string why = std::string("cannot open the OpenCL ICD loader (") + dlerror() +
                              "): install ocl-icd-libopencl1, or name the library in PORTER_OPENCL_LIBRARY";
            die(why.c_str());
        }
#define PORTER_CL_LOAD(name)                                                              \
    f.name = reinterpret_cast<decltype(f.name)>(dlsym(lib, "cl" #name));                 \
    if (f.name == nullptr) die("the OpenCL library lacks cl" #name " (OpenCL 1.2 needed)");
        PORTER_CL_LOAD(GetPlatformIDs) PORTER_CL_LOAD(GetPlatformInfo) PORTER_CL_LOAD(GetDeviceIDs)
        PORTER_CL_LOAD(GetDeviceInfo) PORTER_CL_LOAD(CreateContext) PORTER_CL_LOAD(CreateCommandQueue)
        PORTER_CL_LOAD(ReleaseCommandQueue) PORTER_CL_LOAD(CreateBuffer) PORTER_CL_LOAD(CreateSubBuffer)
        PORTER_CL_LOAD(ReleaseMemObject) PORTER_CL_LOAD(CreateProgramWithSource) PORTER_CL_LOAD(BuildProgram)
        PORTER_CL_LOAD(CreateProgramWithBinary) PORTER_CL_LOAD(GetProgramInfo) PORTER_CL_LOAD(ReleaseProgram)
        PORTER_CL_LOAD(GetProgramBuildInfo) PORTER_CL_LOAD(CreateKernel) PORTER_CL_LOAD(SetKernelArg)
        PORTER_CL_LOAD(EnqueueNDRangeKernel) PORTER_CL_LOAD(EnqueueReadBuffer) PORTER_CL_LOAD(EnqueueWriteBuffer)
        PORTER_CL_LOAD(EnqueueCopyBuffer) PORTER_CL_LOAD(EnqueueFillBuffer) PORTER_CL_LOAD(Finish)
#undef PORTER_CL_LOAD
        return f;
    }();
    return a;
}

inline std::string info_string(cl_device_id d, cl_uint what) {
    char buf[1024] = {0};
    api().GetDeviceInfo(d, what, sizeof buf - 1, buf, nullptr);
    return buf;
}
template <class T>
inline T info_value(cl_device_id d, cl_uint what) {
    T v{};
    api().GetDeviceInfo(d, what, sizeof v, &v, nullptr);
    return v;
}

// `pick` chooses among `names`: an index ("1"), a part of a name ("Intel"), or nothing (-1: the first).
inline int choose(const char* pick, const std::vector<std::string>& names, const char* what) {
    if (pick == nullptr || *pick == 0) return -1;
    char* end = nullptr;
    long n = strtol(pick, &end, 10);
    if (end && *end == 0) {
        if (n < 0 || (size_t)n >= names.size()) {
            std::string why = std::string(what) + " " + pick + " does not exist (" + std::to_string(names.size()) + " found)";
            die(why.c_str());
        }
        return (int)n;
    }
    for (size_t i = 0; i < names.size(); ++i)
        if (names[i].find(pick) != std::string::npos) return (int)i;
    std::string why = std::string("no ") + what + " named like '" + pick + "'; found:";
    for (const std::string& s : names) why += " '" + s + "'";
    die(why.c_str());
}

struct Alloc {
    cl_mem mem;
    size_t bytes;
    std::map<size_t, cl_mem> views;  // offset -> sub-buffer, made when a launch points there
};

struct State {
    cl_platform_id platform = nullptr;
    cl_device_id device = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;  // the default stream
    std::vector<porter_stream*> streams;
    std::string device_name, c_version;
    size_t align = 128;       // sub-buffer offsets: a multiple of this many bytes
    size_t max_group = 1024;  // work-items per work-group
    std::map<uintptr_t, Alloc> allocs;
    uintptr_t next = (uintptr_t)0x00a0000000000000ULL;  // porter's device addresses: never mapped on the host
    std::map<std::string, cl_program> programs;         // by source path
    std::map<std::string, cl_kernel> kernels;           // by source path + '\n' + entry
    std::map<const void*, std::pair<cl_mem, unsigned long long>> symbols;  // host variable -> buffer, version
    unsigned long long symbol_version = 1;
};

inline std::recursive_mutex& lock() {
    static std::recursive_mutex m;
    return m;
}

inline State& state() {
    static State* s = [] {
        State* st = new State();
        Api& cl = api();
        cl_uint np = 0;
        if (cl.GetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0)
            die("no OpenCL platform (is an ICD installed, e.g. pocl-opencl-icd?)");
        std::vector<cl_platform_id> plats(np);
        cl.GetPlatformIDs(np, plats.data(), nullptr);
        std::vector<std::string> pnames;
        for (cl_platform_id p : plats) {
            char buf[256] = {0};
            cl.GetPlatformInfo(p, CL_PLATFORM_NAME, sizeof buf - 1, buf, nullptr);
            pnames.push_back(buf);
        }
        int pi = choose(getenv("PORTER_OPENCL_PLATFORM"), pnames, "OpenCL platform");
        for (cl_uint i = 0; i < np; ++i) {
            if (pi >= 0 && (int)i != pi) continue;
            cl_uint nd = 0;
            if (cl.GetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
            std::vector<cl_device_id> devs(nd);
            cl.GetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr);
            std::vector<std::string> dnames;
            for (cl_device_id d : devs) dnames.push_back(info_string(d, CL_DEVICE_NAME));
            int di = choose(getenv("PORTER_OPENCL_DEVICE"), dnames, "OpenCL device");
            st->platform = plats[i];
            st->device = devs[di < 0 ? 0 : di];
            break;
        }
        if (st->device == nullptr) die("no OpenCL device on the chosen platform");
        cl_int err = 0;
        st->context = cl.CreateContext(nullptr, 1, &st->device, nullptr, nullptr, &err);
        if (err != CL_SUCCESS) die("clCreateContext failed");
        st->queue = cl.CreateCommandQueue(st->context, st->device, 0, &err);
        if (err != CL_SUCCESS) die("clCreateCommandQueue failed");
        st->device_name = info_string(st->device, CL_DEVICE_NAME);
        st->c_version = info_string(st->device, CL_DEVICE_OPENCL_C_VERSION);
        cl_uint bits = info_value<cl_uint>(st->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN);
        if (bits >= 8) st->align = bits / 8;
        st->max_group = info_value<size_t>(st->device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
        if (getenv("PORTER_OPENCL_VERBOSE"))
            fprintf(stderr, "porter opencl runtime: %s (%s)\n", st->device_name.c_str(), st->c_version.c_str());
        return st;
    }();
    return *s;
}

// (the allocation holding p, its base) or (nullptr, 0)
inline std::pair<Alloc*, uintptr_t> find(const void* p) {
    State& s = state();
    auto it = s.allocs.upper_bound((uintptr_t)p);
    if (it == s.allocs.begin()) return {nullptr, 0};
    --it;
    if ((uintptr_t)p < it->first + (it->second.bytes ? it->second.bytes : 1)) return {&it->second, it->first};
    return {nullptr, 0};
}

inline cudaError_t g_last_error = cudaSuccess;
inline cudaError_t g_sticky_error = cudaSuccess;
inline cudaError_t note(cudaError_t e) {
    if (e != cudaSuccess) g_last_error = e;
    return e;
}

inline cl_command_queue queue_of(cudaStream_t s) { return s ? s->queue : state().queue; }

// CUDA's legacy default stream: before work on `q`, the work it must follow is finished
inline cl_int order_before(cl_command_queue q) {
    State& s = state();
    cl_int err = CL_SUCCESS;
    if (q == s.queue) {
        for (porter_stream* st : s.streams)
            if (cl_int e = api().Finish(st->queue)) err = e;
    } else {
        err = api().Finish(s.queue);
    }
    return err;
}
inline cl_int finish_all() {
    State& s = state();
    cl_int err = api().Finish(s.queue);
    for (porter_stream* st : s.streams)
        if (cl_int e = api().Finish(st->queue)) err = e;
    return err;
}
inline cudaError_t device_failed(cl_int err, const char* where) {
    fprintf(stderr, "porter opencl runtime: %s failed (OpenCL error %d)\n", where, (int)err);
    g_sticky_error = cudaErrorLaunchFailure;
    return note(cudaErrorLaunchFailure);
}

inline double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

inline std::string source_text(const Source& src) {
    const char* dir = getenv("PORTER_OPENCL_SOURCES");
    if (dir == nullptr || *dir == 0) return src.text;
    std::string path = std::string(dir) + "/" + src.path;
    FILE* f = fopen(path.c_str(), "rb");
    if (f == nullptr) {
        std::string why = "PORTER_OPENCL_SOURCES: cannot read " + path;
        die(why.c_str());
    }
    std::string text;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    fclose(f);
    return text;
}

// Whether the translation's porter_fast_* macros (CUDA's fast-math intrinsics) are the device's native_
// functions: its type and vendor are those of porter_native_math_* (porter_opencl_sources.h, generated from
// backends/opencl/dialect.toml [facts.native_math], the rule porter's own kernel builds apply)
inline bool device_rule(cl_device_id d, cl_bitfield types, const char* const* vendors, size_t count) {
    if ((info_value<cl_bitfield>(d, CL_DEVICE_TYPE) & types) == 0) return false;
    std::string vendor = info_string(d, CL_DEVICE_VENDOR);
    vendor.erase(0, vendor.find_first_not_of(" \t"));
    for (size_t i = 0; i < count; ++i)
        if (vendor.rfind(vendors[i], 0) == 0) return true;
    return false;
}

inline bool native_math(cl_device_id d) {
    return device_rule(d, porter_native_math_types, porter_native_math_vendors, porter_native_math_vendor_count);
}

// Whether a run without porter builds porter's own sub-groups (ptx_subgroups.cl, in a translation whose kernels
// need them) for this device: one porter_ptx_subgroups_* names that declares no sub-groups of its own.  Under
// porter, PORTER_OPENCL_DEFINES says instead (its probe ran them).
inline bool ptx_subgroups(cl_device_id d) {
    std::string ext = info_string(d, CL_DEVICE_EXTENSIONS);
    if (ext.find("cl_khr_subgroups") != std::string::npos || ext.find("cl_intel_subgroups") != std::string::npos)
        return false;
    return device_rule(d, porter_ptx_subgroups_types, porter_ptx_subgroups_vendors,
                       porter_ptx_subgroups_vendor_count);
}

// PORTER_OPENCL_CACHE names a folder where each program's binary for this device is kept (what
// clGetProgramInfo gives after a build from source), so later runs load it instead of compiling the OpenCL C
// again -- as NVIDIA's driver does for itself, and as a CPU runtime compiling hundreds of kernels does not.
// The file's name is a hash of the source, the build options, the platform's version and the device's name,
// driver and version: another source, option or driver is another file.  A binary the device refuses (or
// that does not build) is built from source again; the folder is never required.
inline uint64_t fnv1a(const unsigned char* data, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 1099511628211ULL;
    return h;
}

inline std::string cache_path(const std::string& text, const std::string& options) {
    const char* dir = getenv("PORTER_OPENCL_CACHE");
    if (dir == nullptr || *dir == 0) return "";
    State& s = state();
    char version[512] = {0};
    api().GetPlatformInfo(s.platform, CL_PLATFORM_VERSION, sizeof version - 1, version, nullptr);
    std::string what = text;
    for (const std::string& part : {options, std::string(version), s.device_name,
                                    info_string(s.device, CL_DRIVER_VERSION), info_string(s.device, CL_DEVICE_VERSION)})
        what += std::string(1, '\0') + part;
    // FNV-1a, and a second hash seeded and mixed otherwise: 128 bits of name
    uint64_t a = fnv1a(reinterpret_cast<const unsigned char*>(what.data()), what.size()), b = 0x9e3779b97f4a7c15ULL;
    for (unsigned char c : what) b = (b ^ c) * 0x100000001b3ULL + 0x7f4a7c15ULL;
    char name[64];
    snprintf(name, sizeof name, "/%016llx%016llx.clbin", (unsigned long long)a, (unsigned long long)b);
    return std::string(dir) + name;
}

// A kept file is "PORTERCL", the binary's length and its FNV-1a hash (8 bytes each, little-endian), then the
// binary: a file cut short or written over is never handed to the driver (PoCL crashes on a damaged binary).
constexpr char kept_magic[9] = "PORTERCL";
constexpr size_t kept_header = 24;

inline cl_program cached_program(const std::string& path, const std::string& options) {
    FILE* f = path.empty() ? nullptr : fopen(path.c_str(), "rb");
    if (f == nullptr) return nullptr;
    std::string data;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
    fclose(f);
    uint64_t len = 0, hash = 0;
    if (data.size() <= kept_header || memcmp(data.data(), kept_magic, 8) != 0) return nullptr;
    memcpy(&len, data.data() + 8, 8);
    memcpy(&hash, data.data() + 16, 8);
    const unsigned char* ptr = reinterpret_cast<const unsigned char*>(data.data()) + kept_header;
    size_t size = data.size() - kept_header;
    if (len != size || hash != fnv1a(ptr, size)) return nullptr;
    State& s = state();
    cl_int status = 0, err = 0;
    cl_program p = api().CreateProgramWithBinary(s.context, 1, &s.device, &size, &ptr, &status, &err);
    if (p == nullptr || err != CL_SUCCESS || status != CL_SUCCESS ||
        api().BuildProgram(p, 1, &s.device, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
        if (p != nullptr) api().ReleaseProgram(p);
        return nullptr;
    }
    return p;
}

inline void keep_program(const std::string& path, cl_program p) {
    if (path.empty()) return;
    size_t size = 0;
    if (api().GetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS || size == 0)
        return;
    std::vector<unsigned char> data(size);
    unsigned char* ptr = data.data();
    if (api().GetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return;
    std::string name = path + ".tmp.XXXXXX";
    std::vector<char> tmp(name.begin(), name.end());
    tmp.push_back('\0');
    int fd = mkstemp(tmp.data());  // a name no other process writes
    FILE* f = fd < 0 ? nullptr : fdopen(fd, "wb");
    if (f == nullptr) {
        if (fd >= 0) remove(tmp.data());
        return;
    }
    uint64_t len = size, hash = fnv1a(data.data(), size);
    bool ok = fwrite(kept_magic, 1, 8, f) == 8 && fwrite(&len, 1, 8, f) == 8 && fwrite(&hash, 1, 8, f) == 8;
    ok = ok && fwrite(data.data(), 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp.data(), path.c_str()) != 0) remove(tmp.data());  // a reader never sees half a file
}

inline cl_program program(const Source& src) {
    State& s = state();
    auto it = s.programs.find(src.path);
    if (it != s.programs.end()) return it->second;
    std::string text = source_text(src);
    // CUDA contracts a * b + c into an FMA by default (nvcc --fmad=true): so may the OpenCL compiler
    // (PORTER_OPENCL_OPTIONS replaces that choice: "" builds with the unit's -D alone)
    const char* chosen = getenv("PORTER_OPENCL_OPTIONS");
    std::string options = std::string(chosen ? chosen : "-cl-mad-enable") + " " + src.options;
    // what porter's probe found this device lacks though it declares it (-DPORTER_NO_SUBGROUP_32)
    const char* off = getenv("PORTER_OPENCL_DEFINES");
    if (off != nullptr) options += std::string(" ") + off;
    else if (text.find(porter_ptx_subgroups_define) != std::string::npos && *porter_ptx_subgroups_define &&
             ptx_subgroups(s.device))
        options += std::string(" -D") + porter_ptx_subgroups_define;
    if (native_math(s.device)) options += std::string(" -D") + porter_native_math_define;
    // sub-group functions come as an OpenCL C 2.0 extension or a 3.0 feature: ask for the device's version
    if (text.find("sub_group") != std::string::npos) {
        if (s.c_version.find("C 3.") != std::string::npos) options += " -cl-std=CL3.0";
        else if (s.c_version.find("C 2.") != std::string::npos) options += " -cl-std=CL2.0";
    }
    std::string cached = cache_path(text, options);
    cl_program p = cached_program(cached, options);
    if (p != nullptr) {
        if (getenv("PORTER_OPENCL_VERBOSE"))
            fprintf(stderr, "porter opencl runtime: %s loaded from %s\n", src.path, cached.c_str());
        s.programs[src.path] = p;
        return p;
    }
    const char* ptr = text.c_str();
    size_t len = text.size();
    cl_int err = 0;
    p = api().CreateProgramWithSource(s.context, 1, &ptr, &len, &err);
    if (err != CL_SUCCESS) die("clCreateProgramWithSource failed");
    if (getenv("PORTER_OPENCL_VERBOSE"))
        fprintf(stderr, "porter opencl runtime: building %s with options \"%s\"\n", src.path, options.c_str());
    err = api().BuildProgram(p, 1, &s.device, options.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS) {
        size_t n = 0;
        api().GetProgramBuildInfo(p, s.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
        std::string log(n, '\0');
        api().GetProgramBuildInfo(p, s.device, CL_PROGRAM_BUILD_LOG, n, &log[0], nullptr);
        fprintf(stderr, "porter opencl runtime: building %s for %s failed (OpenCL error %d):\n%s\n", src.path,
                s.device_name.c_str(), (int)err, log.c_str());
        die("the port's OpenCL C does not build on this device");
    }
    keep_program(cached, p);
    s.programs[src.path] = p;
    return p;
}

// The kernel `entry`, from `file` (its unit's .cl) or, failing that, any of the port's sources.
inline cl_kernel kernel(const char* file, const char* entry) {
    State& s = state();
    std::string key = std::string(file) + "\n" + entry;
    auto it = s.kernels.find(key);
    if (it != s.kernels.end()) return it->second;
    const Source* order[2] = {nullptr, nullptr};
    for (size_t i = 0; i < porter_opencl_source_count; ++i)
        if (strcmp(porter_opencl_sources[i].path, file) == 0) order[0] = &porter_opencl_sources[i];
    for (int pass = 0; pass < 2; ++pass) {
        for (size_t i = 0; i < (pass == 0 ? 1 : porter_opencl_source_count); ++i) {
            const Source* src = pass == 0 ? order[0] : &porter_opencl_sources[i];
            if (src == nullptr || (pass == 1 && src == order[0])) continue;
            cl_int err = 0;
            cl_kernel k = api().CreateKernel(program(*src), entry, &err);
            if (err == CL_SUCCESS) {
                s.kernels[key] = k;
                return k;
            }
        }
    }
    for (size_t i = 0; i < porter_opencl_source_count; ++i) {  // compiled out: the device lacks what it needs
        std::string cond = guard_of(source_text(porter_opencl_sources[i]), entry);
        if (!cond.empty())
            unavailable(std::string("kernel '") + entry + "' needs " + cond + ", which " + s.device_name +
                        "'s OpenCL C lacks");
    }
    std::string why = std::string("no OpenCL kernel '") + entry + "' in " + file + " or any source of the port";
    die(why.c_str());
}

// The launch the host stub of a kernel is making (set by launch_kernel around the stub's call).
inline thread_local const porter_emu::Config* g_config = nullptr;
inline thread_local cudaError_t g_status = cudaSuccess;

// A host stub's launch: the OpenCL kernel's arguments, set one by one in the translation's order, then
// the NDRange of the CUDA launch.
class Launch {
  public:
    Launch(const char* entry, const char* file) : entry_(entry) {
        if (g_config == nullptr) {
            fprintf(stderr, "porter opencl runtime: kernel %s called outside a launch\n", entry);
            failed_ = true;
            return;
        }
        kernel_ = kernel(file, entry);
    }
    template <class T>
    Launch& arg(T* p) {
        if (failed_) return *this;
        if (p == nullptr) return set(sizeof(cl_mem), nullptr);
        auto found = find((const void*)p);
        if (found.first == nullptr) {
            fprintf(stderr, "porter opencl runtime: argument %u of %s is %p, not device memory from cudaMalloc\n",
                    index_, entry_, (const void*)p);
            return fail(cudaErrorInvalidDevicePointer);
        }
        size_t offset = (uintptr_t)p - found.second;
        cl_mem mem = found.first->mem;
        used_.push_back(found.first);
        if (offset) {
            auto v = found.first->views.find(offset);
            if (v != found.first->views.end()) {
                mem = v->second;
            } else {
                if (offset % state().align) {  // no sub-buffer there: the kernel works on a copy of the rest
                    cl_int err = 0;
                    size_t n = found.first->bytes - offset;
                    cl_mem temp = api().CreateBuffer(state().context, CL_MEM_READ_WRITE, n ? n : 1, nullptr, &err);
                    if (err != CL_SUCCESS) return fail(device_failed(err, "a staging buffer for an unaligned argument"));
                    staged_.push_back({found.first, temp, offset, n});
                    return set(sizeof(cl_mem), &temp);
                }
                cl_buffer_region region{offset, found.first->bytes - offset};
                cl_int err = 0;
                mem = api().CreateSubBuffer(found.first->mem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region,
                                            &err);
                if (err != CL_SUCCESS) {
                    fprintf(stderr, "porter opencl runtime: a sub-buffer at offset %zu for %s failed (OpenCL error %d)\n",
                            offset, entry_, (int)err);
                    return fail(cudaErrorInvalidValue);
                }
                found.first->views[offset] = mem;
            }
        }
        return set(sizeof(cl_mem), &mem);
    }
    template <class T, std::enable_if_t<!std::is_pointer_v<T>, int> = 0>
    Launch& arg(const T& v) {
        return set(sizeof(T), &v);
    }
    // the launch's dynamic shared memory (an `extern __shared__` array: a __local argument)
    Launch& local() { return set(g_config->shared ? g_config->shared : 1, nullptr); }
    // a texture reference the kernel reads: the memory bound to it now (a pointer argument)
    template <class T, int dim, enum cudaTextureReadMode M>
    Launch& texref(const ::texture<T, dim, M>& tex, const char* name) {
        if (failed_) return *this;
        if (tex.porter_ptr == nullptr) {
            fprintf(stderr,
                    "porter opencl runtime: %s reads the texture reference %s, which is not bound at this launch "
                    "(no cudaBindTexture before it, or cudaUnbindTexture since)\n",
                    entry_, name);
            return fail(cudaErrorInvalidTextureBinding);
        }
        return arg((const T*)tex.porter_ptr);
    }
    // ... and how many elements of T that binding holds (a fetch past them reads zero, as CUDA's does)
    template <class T, int dim, enum cudaTextureReadMode M>
    Launch& texref_size(const ::texture<T, dim, M>& tex) {
        size_t n = tex.porter_bytes / sizeof(T);
        cl_uint count = n > 0xFFFFFFFFu ? 0xFFFFFFFFu : (cl_uint)n;
        return set(sizeof count, &count);
    }
    // a __constant__ variable: its bytes as the host variable holds them, in a buffer of its own
    template <class T>
    Launch& symbol(const T& var) {
        if (failed_) return *this;
        State& s = state();
        auto& slot = s.symbols[(const void*)&var];
        cl_int err = CL_SUCCESS;
        if (slot.first == nullptr) slot.first = api().CreateBuffer(s.context, CL_MEM_READ_WRITE, sizeof(T), nullptr, &err);
        if (err == CL_SUCCESS && slot.second != s.symbol_version) {
            err = api().EnqueueWriteBuffer(queue_of(g_config->stream), slot.first, CL_TRUE, 0, sizeof(T), &var, 0, nullptr,
                                           nullptr);
            slot.second = s.symbol_version;
        }
        if (err != CL_SUCCESS) return fail(device_failed(err, "uploading a __constant__ variable"));
        return set(sizeof(cl_mem), &slot.first);
    }
    void run() {
        if (failed_) {
            g_status = note(g_status == cudaSuccess ? cudaErrorLaunchFailure : g_status);
            return;
        }
        const porter_emu::Config& c = *g_config;
        size_t local[3] = {c.block.x, c.block.y, c.block.z};
        size_t global[3] = {(size_t)c.grid.x * c.block.x, (size_t)c.grid.y * c.block.y, (size_t)c.grid.z * c.block.z};
        cl_command_queue q = queue_of(c.stream);
        for (const Staged& s : staged_) {
            size_t uses = 0;
            for (Alloc* a : used_) uses += a == s.alloc;
            if (uses > 1) {
                fprintf(stderr,
                        "porter opencl runtime: %s takes two pointers into one allocation, one of them at an offset "
                        "OpenCL cannot make a sub-buffer at (%zu bytes; %zu needed on %s)\n",
                        entry_, s.offset, state().align, state().device_name.c_str());
                release_staged();
                g_status = note(cudaErrorInvalidValue);
                return;
            }
        }
        cl_int err = order_before(q);
        for (const Staged& s : staged_)
            if (err == CL_SUCCESS && s.bytes)
                err = api().EnqueueCopyBuffer(q, s.alloc->mem, s.temp, s.offset, 0, s.bytes, 0, nullptr, nullptr);
        if (err == CL_SUCCESS) err = api().EnqueueNDRangeKernel(q, kernel_, 3, nullptr, global, local, 0, nullptr, nullptr);
        for (const Staged& s : staged_)  // what the kernel wrote goes back where the program will read it
            if (err == CL_SUCCESS && s.bytes)
                err = api().EnqueueCopyBuffer(q, s.temp, s.alloc->mem, 0, s.offset, s.bytes, 0, nullptr, nullptr);
        release_staged();
        if (err != CL_SUCCESS) {
            fprintf(stderr, "porter opencl runtime: launching %s (grid %u,%u,%u block %u,%u,%u) failed (OpenCL error %d)\n",
                    entry_, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, (int)err);
            g_status = note(cudaErrorLaunchFailure);
            return;
        }
        if (getenv("PORTER_OPENCL_SYNC")) {  // every launch finished before the next call: errors where they happen
            err = api().Finish(q);
            if (err != CL_SUCCESS) g_status = device_failed(err, entry_);
        }
    }

  private:
    struct Staged {
        Alloc* alloc;
        cl_mem temp;
        size_t offset, bytes;
    };
    void release_staged() {
        for (const Staged& s : staged_) api().ReleaseMemObject(s.temp);  // freed once its commands are done
        staged_.clear();
    }
    Launch& set(size_t n, const void* v) {
        if (failed_) return *this;
        cl_int err = api().SetKernelArg(kernel_, index_, n, v);
        if (err != CL_SUCCESS) {
            fprintf(stderr, "porter opencl runtime: argument %u of %s (%zu bytes) refused (OpenCL error %d)\n", index_,
                    entry_, n, (int)err);
            return fail(cudaErrorInvalidValue);
        }
        ++index_;
        return *this;
    }
    Launch& fail(cudaError_t e) {
        release_staged();
        failed_ = true;
        g_status = e;
        return *this;
    }
    const char* entry_;
    cl_kernel kernel_ = nullptr;
    cl_uint index_ = 0;
    bool failed_ = false;
    std::vector<Staged> staged_;  // arguments at offsets no sub-buffer can start at
    std::vector<Alloc*> used_;    // the allocation of every pointer argument
};

// A kernel porter could not translate: the build refuses a program that launches one, so this runs only
// when the refusal was overridden.
inline void untranslatable(const char* kernel, const char* why) {
    fprintf(stderr, "porter opencl runtime: kernel %s has no OpenCL translation: %s\n", kernel, why);
    g_status = note(cudaErrorInvalidDeviceFunction);
}
// An instance of a template kernel the translation did not make (no launch of it was seen).
inline void no_instance(const char* kernel, const char* why) { untranslatable(kernel, why); }
// A template kernel the translation made no instance of at all.
inline void no_instances(const char* kernel, const char* why) { untranslatable(kernel, why); }

inline cudaError_t allocate(void** out, size_t bytes) {
    if (out == nullptr) return note(cudaErrorInvalidValue);
    std::lock_guard<std::recursive_mutex> guard(lock());
    State& s = state();
    cl_int err = 0;
    cl_mem mem = api().CreateBuffer(s.context, CL_MEM_READ_WRITE, bytes ? bytes : 1, nullptr, &err);
    if (err != CL_SUCCESS) {
        *out = nullptr;
        return note(cudaErrorMemoryAllocation);
    }
    const unsigned char zero = 0;  // fresh device memory reads as zero, as a GPU driver's pages do
    if (bytes) api().EnqueueFillBuffer(s.queue, mem, &zero, 1, 0, bytes, 0, nullptr, nullptr);
    uintptr_t base = s.next;
    s.next += ((bytes + 4095) & ~(uintptr_t)4095) + 4096;
    s.allocs[base] = Alloc{mem, bytes, {}};
    *out = (void*)base;
    return cudaSuccess;
}
inline cudaError_t release(void* p) {
    if (p == nullptr) return cudaSuccess;
    std::lock_guard<std::recursive_mutex> guard(lock());
    State& s = state();
    auto it = s.allocs.find((uintptr_t)p);
    if (it == s.allocs.end()) return note(cudaErrorInvalidDevicePointer);
    finish_all();
    for (auto& v : it->second.views) api().ReleaseMemObject(v.second);
    api().ReleaseMemObject(it->second.mem);
    s.allocs.erase(it);
    return cudaSuccess;
}

// What cudaGetDeviceProperties says.  A GPU: its own figures (memory, limits, clock, compute units).  A CPU
// device: the virtual device porter's CPU runtime reports (backends/cpu/runtime.toml; the same name aside),
// so a program that sizes its work by the device (transpose scales its matrix by the multiprocessors) does
// the work the original did on the CPU runtime.  PORTER_OPENCL_PROPERTIES=device|virtual chooses.
inline bool virtual_properties() {
    const char* chosen = getenv("PORTER_OPENCL_PROPERTIES");
    if (chosen && strcmp(chosen, "virtual") == 0) return true;
    if (chosen && strcmp(chosen, "device") == 0) return false;
    const cl_bitfield cpu = 1 << 1;  // CL_DEVICE_TYPE_CPU
    return (info_value<cl_bitfield>(state().device, CL_DEVICE_TYPE) & cpu) != 0;
}

inline void fill_properties(cudaDeviceProp* p) {
    memset(p, 0, sizeof *p);
    PORTER_FILL_DEVICE_PROPERTIES(p);
    State& s = state();
    strncpy(p->name, s.device_name.c_str(), sizeof p->name - 1);
    p->warpSize = 32;
    if (virtual_properties()) {
        if ((size_t)p->maxThreadsPerBlock > s.max_group) p->maxThreadsPerBlock = (int)s.max_group;
        return;
    }
    p->totalGlobalMem = (size_t)info_value<cl_ulong>(s.device, CL_DEVICE_GLOBAL_MEM_SIZE);
    p->sharedMemPerBlock = (size_t)info_value<cl_ulong>(s.device, CL_DEVICE_LOCAL_MEM_SIZE);
    p->totalConstMem = (size_t)info_value<cl_ulong>(s.device, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE);
    p->maxThreadsPerBlock = (int)s.max_group;
    p->multiProcessorCount = (int)info_value<cl_uint>(s.device, CL_DEVICE_MAX_COMPUTE_UNITS);
    p->clockRate = (int)info_value<cl_uint>(s.device, CL_DEVICE_MAX_CLOCK_FREQUENCY) * 1000;
    // an NVIDIA GPU says its compute capability (elsewhere: the runtime's virtual device's)
    if (info_string(s.device, CL_DEVICE_EXTENSIONS).find("cl_nv_device_attribute_query") != std::string::npos) {
        p->major = (int)info_value<cl_uint>(s.device, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV);
        p->minor = (int)info_value<cl_uint>(s.device, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV);
    }
}

}  // namespace porter_opencl

// --------------------------------------------------------------------------- porter_capture.h's hooks

namespace porter_emu __attribute__((visibility("hidden"))) {
inline std::pair<uintptr_t, size_t> allocation_of(const void* p) {
    auto found = porter_opencl::find(p);
    return found.first ? std::pair<uintptr_t, size_t>{found.second, found.first->bytes} : std::pair<uintptr_t, size_t>{0, 0};
}
inline std::recursive_mutex& runtime_lock() { return porter_opencl::lock(); }
inline int capture_sync() { return (int)porter_opencl::finish_all(); }
inline bool capture_allowed(const void*) { return false; }  // a port's runs are compared, not captured
inline const void* capture_bytes(uintptr_t, size_t, bool, std::vector<unsigned char>&) { return nullptr; }
inline const char* kernel_mangled_name(const void* fn) { return exported_symbol(fn); }

inline cudaError_t check_config(const Config& c) {
    unsigned long long threads = (unsigned long long)c.block.x * c.block.y * c.block.z;
    if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || threads == 0 || threads > 1024 || c.block.z > 64 ||
        c.grid.y > 65535 || c.grid.z > 65535)
        return cudaErrorInvalidConfiguration;
    if (threads > porter_opencl::state().max_group) {
        fprintf(stderr, "porter opencl runtime: a block of %llu threads is more than %s's %zu work-items per group\n",
                threads, porter_opencl::state().device_name.c_str(), porter_opencl::state().max_group);
        return cudaErrorInvalidConfiguration;
    }
    return cudaSuccess;
}

// porter's rewrite of k<<<g, b, s, st>>>(args): the kernel's host stub runs once, with the launch set
template <class... P>
inline cudaError_t launch_kernel(void (*kernel)(P...), const Config& c, std::tuple<typename ParamOf<P>::type...> args,
                                 const char* = "a kernel") {
    std::lock_guard<std::recursive_mutex> guard(porter_opencl::lock());
    if (porter_opencl::g_sticky_error != cudaSuccess) return porter_opencl::g_sticky_error;
    if (cudaError_t e = check_config(c)) return porter_opencl::note(e);
    porter_opencl::g_config = &c;
    porter_opencl::g_status = cudaSuccess;
    std::apply(kernel, args);
    porter_opencl::g_config = nullptr;
    return porter_opencl::g_status;
}
template <class F, class... A>
inline cudaError_t launch_deduced(const Config& c, F f, const char*, A&&... a) {
    std::lock_guard<std::recursive_mutex> guard(porter_opencl::lock());
    if (porter_opencl::g_sticky_error != cudaSuccess) return porter_opencl::g_sticky_error;
    if (cudaError_t e = check_config(c)) return porter_opencl::note(e);
    porter_opencl::g_config = &c;
    porter_opencl::g_status = cudaSuccess;
    f(std::forward<A>(a)...);
    porter_opencl::g_config = nullptr;
    return porter_opencl::g_status;
}
template <class... P>
inline cudaError_t launch_args(void (*kernel)(P...), dim3 grid, dim3 block, void** args, size_t shared = 0,
                               cudaStream_t stream = 0) {
    if (kernel == nullptr) return porter_opencl::note(cudaErrorInvalidDeviceFunction);
    if (args == nullptr && sizeof...(P) > 0) return porter_opencl::note(cudaErrorInvalidValue);
    return launch_kernel(kernel, Config(grid, block, shared, stream),
                         args_tuple<P...>(args, std::index_sequence_for<P...>{}), "cudaLaunchKernel");
}
inline cudaError_t launch_args(const void* fn, dim3 grid, dim3 block, void** args, size_t shared = 0,
                               cudaStream_t stream = 0) {
    const KernelEntry* e = registered_kernel(fn);
    if (e == nullptr || args == nullptr) return porter_opencl::note(cudaErrorInvalidDeviceFunction);
    return (cudaError_t)e->launch(fn, e->name.c_str(), Config(grid, block, shared, stream), args);
}
template <class K>
inline cudaError_t launch_args_cooperative(K kernel, dim3 grid, dim3 block, void** args, size_t shared = 0,
                                           cudaStream_t stream = 0) {
    return launch_args(kernel, grid, block, args, shared, stream);
}
}  // namespace porter_emu

// --------------------------------------------------------------------------- errors and devices

static inline cudaError_t cudaGetLastError() {
    cudaError_t e = porter_opencl::g_last_error;
    porter_opencl::g_last_error = porter_opencl::g_sticky_error;
    return e;
}
static inline cudaError_t cudaPeekAtLastError() { return porter_opencl::g_last_error; }
static inline cudaError_t cudaGetDeviceCount(int* n) {
    if (!n) return porter_opencl::note(cudaErrorInvalidValue);
    porter_opencl::state();
    *n = 1;
    return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : porter_opencl::note(cudaErrorInvalidDevice); }
static inline cudaError_t cudaGetDevice(int* d) {
    if (!d) return porter_opencl::note(cudaErrorInvalidValue);
    *d = 0;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
    if (!p) return porter_opencl::note(cudaErrorInvalidValue);
    if (d != 0) return porter_opencl::note(cudaErrorInvalidDevice);
    porter_opencl::fill_properties(p);
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d) {
    if (!v) return porter_opencl::note(cudaErrorInvalidValue);
    if (d != 0) return porter_opencl::note(cudaErrorInvalidDevice);
    cudaDeviceProp p;
    porter_opencl::fill_properties(&p);
    *v = porter_emu::attribute(&p, a);
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize() {
    porter_cl::cl_int err = porter_opencl::finish_all();
    if (err != porter_cl::CL_SUCCESS) return porter_opencl::device_failed(err, "cudaDeviceSynchronize");
    return porter_opencl::g_sticky_error;
}
static inline cudaError_t cudaThreadSynchronize() { return cudaDeviceSynchronize(); }
static inline cudaError_t cudaDeviceReset() {
    porter_opencl::finish_all();
    porter_opencl::g_sticky_error = porter_opencl::g_last_error = cudaSuccess;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetLimit(size_t* v, cudaLimit) { *v = 0; return cudaSuccess; }
static inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    cudaDeviceProp p;
    porter_opencl::fill_properties(&p);
    size_t used = 0;
    for (auto& kv : porter_opencl::state().allocs) used += kv.second.bytes;
    if (total) *total = p.totalGlobalMem;
    if (free_bytes) *free_bytes = p.totalGlobalMem > used ? p.totalGlobalMem - used : 0;
    return cudaSuccess;
}

// --------------------------------------------------------------------------- memory

template <class T>
static inline cudaError_t cudaMalloc(T** p, size_t bytes) { return porter_opencl::allocate((void**)p, bytes); }
static inline cudaError_t cudaFree(void* p) { return porter_opencl::release(p); }
template <class T>
static inline cudaError_t cudaMallocAsync(T** p, size_t bytes, cudaStream_t) { return porter_opencl::allocate((void**)p, bytes); }
static inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return porter_opencl::release(p); }
template <class T>
static inline cudaError_t cudaMallocPitch(T** p, size_t* pitch, size_t width, size_t height) {
    size_t row = (width + 255) & ~(size_t)255;
    if (pitch) *pitch = row;
    return porter_opencl::allocate((void**)p, row * height);
}
// pinned host memory is host memory here (copies are synchronous)
template <class T>
static inline cudaError_t cudaMallocHost(T** p, size_t bytes, unsigned = 0) {
    *p = (T*)aligned_alloc(256, ((bytes + 255) & ~(size_t)255) ?: 256);
    return *p ? cudaSuccess : porter_opencl::note(cudaErrorMemoryAllocation);
}
template <class T>
static inline cudaError_t cudaHostAlloc(T** p, size_t bytes, unsigned) { return cudaMallocHost(p, bytes); }
static inline cudaError_t cudaFreeHost(void* p) {
    free(p);
    return cudaSuccess;
}
static inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
    bool device = porter_opencl::find(p).first != nullptr;
    a->type = device ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    a->device = 0;
    a->devicePointer = device ? (void*)p : nullptr;
    a->hostPointer = device ? nullptr : (void*)p;
    return cudaSuccess;
}

namespace porter_opencl __attribute__((visibility("hidden"))) {
inline cudaError_t copy(void* dst, const void* src, size_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return note(cudaErrorInvalidValue);
    if (g_sticky_error != cudaSuccess) return g_sticky_error;
    std::lock_guard<std::recursive_mutex> guard(lock());
    auto d = find(dst), s = find(src);
    cl_command_queue q = queue_of(stream);
    cl_int err = finish_all();
    if (err != CL_SUCCESS) return device_failed(err, "a kernel before cudaMemcpy");
    if (d.first && n > d.first->bytes - ((uintptr_t)dst - d.second)) return note(cudaErrorInvalidValue);
    if (s.first && n > s.first->bytes - ((uintptr_t)src - s.second)) return note(cudaErrorInvalidValue);
    if (d.first && s.first) {
        err = api().EnqueueCopyBuffer(q, s.first->mem, d.first->mem, (uintptr_t)src - s.second,
                                      (uintptr_t)dst - d.second, n, 0, nullptr, nullptr);
        if (err == CL_SUCCESS) err = api().Finish(q);
    } else if (d.first) {
        err = api().EnqueueWriteBuffer(q, d.first->mem, CL_TRUE, (uintptr_t)dst - d.second, n, src, 0, nullptr, nullptr);
    } else if (s.first) {
        err = api().EnqueueReadBuffer(q, s.first->mem, CL_TRUE, (uintptr_t)src - s.second, n, dst, 0, nullptr, nullptr);
    } else {
        memmove(dst, src, n);
    }
    return err == CL_SUCCESS ? cudaSuccess : device_failed(err, "a copy");
}
inline cudaError_t fill(void* p, int v, size_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    std::lock_guard<std::recursive_mutex> guard(lock());
    auto d = find(p);
    if (d.first == nullptr) return note(cudaErrorInvalidValue);
    if (n > d.first->bytes - ((uintptr_t)p - d.second)) return note(cudaErrorInvalidValue);
    cl_command_queue q = queue_of(stream);
    cl_int err = order_before(q);
    const unsigned char byte = (unsigned char)v;
    if (err == CL_SUCCESS)
        err = api().EnqueueFillBuffer(q, d.first->mem, &byte, 1, (uintptr_t)p - d.second, n, 0, nullptr, nullptr);
    if (err == CL_SUCCESS) err = api().Finish(q);
    return err == CL_SUCCESS ? cudaSuccess : device_failed(err, "cudaMemset");
}
}  // namespace porter_opencl

static inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind = cudaMemcpyDefault) {
    if ((int)kind < 0 || (int)kind > 4) return porter_opencl::note(cudaErrorInvalidMemcpyDirection);
    return porter_opencl::copy(dst, src, n, nullptr);
}
static inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind = cudaMemcpyDefault,
                                          cudaStream_t stream = 0) {
    if ((int)kind < 0 || (int)kind > 4) return porter_opencl::note(cudaErrorInvalidMemcpyDirection);
    return porter_opencl::copy(dst, src, n, stream);
}
static inline cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                       size_t height, cudaMemcpyKind kind = cudaMemcpyDefault) {
    if (width > dpitch || width > spitch) return porter_opencl::note(cudaErrorInvalidPitchValue);
    for (size_t r = 0; r < height; ++r) {
        cudaError_t e = cudaMemcpy((char*)dst + r * dpitch, (const char*)src + r * spitch, width, kind);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
static inline cudaError_t cudaMemset(void* p, int v, size_t n) { return porter_opencl::fill(p, v, n, nullptr); }
static inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s = 0) { return porter_opencl::fill(p, v, n, s); }
static inline cudaError_t cudaMemset2D(void* p, size_t pitch, int v, size_t width, size_t height) {
    for (size_t r = 0; r < height; ++r) {
        cudaError_t e = cudaMemset((char*)p + r * pitch, v, width);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
// __constant__ / __device__ variables are host variables here; a launch uploads a __constant__ one's bytes
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t n, size_t offset = 0,
                                             cudaMemcpyKind = cudaMemcpyHostToDevice) {
    if (offset + n > sizeof(T)) return porter_opencl::note(cudaErrorInvalidValue);
    std::lock_guard<std::recursive_mutex> guard(porter_opencl::lock());
    if (porter_opencl::find(src).first != nullptr) {  // from device memory
        cudaError_t e = porter_opencl::copy((char*)&symbol + offset, src, n, nullptr);
        if (e != cudaSuccess) return e;
    } else {
        memcpy((char*)&symbol + offset, src, n);
    }
    ++porter_opencl::state().symbol_version;
    return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t n, size_t offset = 0,
                                               cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    if (offset + n > sizeof(T)) return porter_opencl::note(cudaErrorInvalidValue);
    memcpy(dst, (const char*)&symbol + offset, n);
    return cudaSuccess;
}

// Texture references over linear memory (above): binding one records the device pointer and the bytes from
// it that lie in its allocation; each launch of a kernel reading it passes them (the other forms, and
// unbinding, are porter_runtime_common.h's).  A pointer not aligned to
// cudaDeviceProp::textureAlignment binds as it is, with *offset 0 (porter's CPU runtime does the same).
static inline cudaError_t cudaBindTexture(size_t* offset, const textureReference* tex, const void* p,
                                          const cudaChannelFormatDesc* = nullptr, size_t bytes = ~(size_t)0) {
    if (tex == nullptr) return porter_opencl::note(cudaErrorInvalidTexture);
    if (offset != nullptr) *offset = 0;
    textureReference* t = const_cast<textureReference*>(tex);
    if (p == nullptr) {
        t->porter_ptr = nullptr;
        t->porter_bytes = 0;
        return cudaSuccess;
    }
    std::lock_guard<std::recursive_mutex> guard(porter_opencl::lock());
    auto found = porter_opencl::find(p);
    if (found.first == nullptr) return porter_opencl::note(cudaErrorInvalidValue);  // not device memory
    size_t room = found.second + found.first->bytes - (uintptr_t)p;
    t->porter_ptr = p;
    t->porter_bytes = bytes < room ? bytes : room;
    return cudaSuccess;
}

// --------------------------------------------------------------------------- streams and events

static inline cudaError_t cudaStreamCreate(cudaStream_t* s) {
    std::lock_guard<std::recursive_mutex> guard(porter_opencl::lock());
    porter_opencl::State& st = porter_opencl::state();
    porter_cl::cl_int err = 0;
    porter_cl::cl_command_queue q = porter_opencl::api().CreateCommandQueue(st.context, st.device, 0, &err);
    if (err != porter_cl::CL_SUCCESS) return porter_opencl::note(cudaErrorMemoryAllocation);
    *s = new porter_stream{q};
    st.streams.push_back(*s);
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
static inline cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) { return cudaStreamCreate(s); }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (s == nullptr) return cudaSuccess;
    std::lock_guard<std::recursive_mutex> guard(porter_opencl::lock());
    porter_opencl::State& st = porter_opencl::state();
    porter_opencl::api().Finish(s->queue);
    porter_opencl::api().ReleaseCommandQueue(s->queue);
    for (size_t i = 0; i < st.streams.size(); ++i)
        if (st.streams[i] == s) st.streams.erase(st.streams.begin() + (long)i);
    delete s;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    porter_cl::cl_int err = porter_opencl::api().Finish(porter_opencl::queue_of(s));
    if (err != porter_cl::CL_SUCCESS) return porter_opencl::device_failed(err, "cudaStreamSynchronize");
    return porter_opencl::g_sticky_error;
}
static inline cudaError_t cudaStreamQuery(cudaStream_t s) { return cudaStreamSynchronize(s); }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) {
    porter_opencl::finish_all();  // the event's work is done before the stream's next
    return cudaSuccess;
}
typedef void (*cudaStreamCallback_t)(cudaStream_t, cudaError_t, void*);
static inline cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void* data, unsigned) {
    cudaError_t e = cudaStreamSynchronize(s);
    cb(s, e, data);
    return cudaSuccess;
}
typedef void (*cudaHostFn_t)(void*);
static inline cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
    cudaStreamSynchronize(s);
    fn(data);
    return cudaSuccess;
}
// an event is the host clock once the stream's queue (and the default stream's) finished its work
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) {
    if (!e) return porter_opencl::note(cudaErrorInvalidResourceHandle);
    porter_cl::cl_int err = s ? porter_opencl::api().Finish(porter_opencl::queue_of(s)) : porter_opencl::finish_all();
    if (err != porter_cl::CL_SUCCESS) return porter_opencl::device_failed(err, "cudaEventRecord");
    e->ms = porter_opencl::now_ms();
    e->recorded = 1;
    return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return porter_opencl::g_sticky_error; }
static inline cudaError_t cudaEventQuery(cudaEvent_t) { return porter_opencl::g_sticky_error; }
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    if (!ms || !a || !b || !a->recorded || !b->recorded) return porter_opencl::note(cudaErrorInvalidResourceHandle);
    *ms = (float)(b->ms - a->ms);
    return cudaSuccess;
}

// --------------------------------------------------------------------------- functions and launches

template <class K>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, K*) {
    memset(a, 0, sizeof *a);
    a->maxThreadsPerBlock = (int)porter_opencl::state().max_group;
    a->numRegs = 32;
    a->ptxVersion = a->binaryVersion = 80;
    return cudaSuccess;
}
template <class K>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int* min_grid, int* block, K, size_t = 0, int limit = 0) {
    int most = (int)porter_opencl::state().max_group;
    int b = limit > 0 && limit < most ? limit : (most < 1024 ? most : 1024);
    cudaDeviceProp p;
    porter_opencl::fill_properties(&p);
    if (block) *block = b;
    if (min_grid) *min_grid = p.multiProcessorCount * (2048 / b > 0 ? 2048 / b : 1);
    return cudaSuccess;
}

#include "porter_runtime_common.h"  // the calls both runtimes define alike

#endif  // PORTER_OPENCL_H
