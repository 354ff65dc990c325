// porter_capture.h -- launch capture, shared by porter's instrumented program builds: the CPU runtime
// (backends/cpu/porter_runtime.h) and the capturing nvcc build (backends/cuda/porter_capture_cuda.h).
//
// With PORTER_CAPTURE_DIR set, a run records kernel launches into that folder, in the format of
// docs/CAPTURE_FORMAT.md: one JSON file per captured launch under launches/ (kernel, grid, block,
// dynamic shared bytes, stream, every argument: a scalar by value and type, a pointer resolved to the
// allocation holding it -- base, size, offset -- and the element type it points to), and the bytes of
// every allocation a pointer argument reaches, before and after the launch, under arrays/, and so are
// the program's __constant__ / __device__ variables (registered by porter's rewrite).  Element types
// are the compiler's own (typedefs, #defines and template arguments already resolved):
// std::is_floating_point / is_integral and sizeof give the NumPy name.
//
// Which launches: per kernel, the first PORTER_CAPTURE_LAUNCHES (default 3); after those the last slot
// is taken again by each launch whose number is a power of two (4, 8, 16, ...), so the launches kept
// spread over the run without knowing its length (10 launches: the 1st, 2nd and 8th).  A launch whose
// allocations exceed PORTER_CAPTURE_MIB (default 64) MiB in all is recorded without its arrays
// ("skipped") -- unless no launch of its kernel has been kept whole yet: that one may take up to
// PORTER_CAPTURE_FIRST_MIB (default 1024), so every kernel of a program at its real size is judged once.
// A launch is also skipped when its arrays (before and after) would not fit the capture folder's free
// disk, and a skipped launch never takes the last slot from a launch kept whole.  Pointers inside a
// struct passed by value are not captured: such an argument is marked ("holds_device_pointer").  The
// run's own results are unchanged.
//
// The runtime including it defines the hooks declared below (namespace porter_emu, "what a runtime
// provides"), and the type dim3 and a stream type before the #include: cudaStream_t, or the one
// PORTER_STREAM_T names (hipStream_t in porter_capture_hip.h).
#ifndef PORTER_CAPTURE_H
#define PORTER_CAPTURE_H

#include <cxxabi.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/stat.h>  // (not <unistd.h>: a program may ship its own, as Rodinia's kmeans does)

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef PORTER_STREAM_T
#define PORTER_STREAM_T cudaStream_t
#endif

namespace porter_emu __attribute__((visibility("hidden"))) {

// ---- what a runtime provides
// (base, bytes) of the allocation holding p, or (0, 0)
inline std::pair<uintptr_t, size_t> allocation_of(const void* p);
inline std::recursive_mutex& runtime_lock();
// wait for the device's work; its error code (0: none)
inline int capture_sync();
// false: leave this launch alone (its stream is being captured into a graph)
inline bool capture_allowed(const void* stream);
// n host-readable bytes at addr (symbol: a registered variable, by its host address), in `scratch` if
// they must be copied; nullptr: unreadable
inline const void* capture_bytes(uintptr_t addr, size_t n, bool symbol, std::vector<unsigned char>& scratch);
// the kernel's (mangled) name, or nullptr
inline const char* kernel_mangled_name(const void* fn);

// ---- the launch interface porter's rewrite calls (backends/launches.py): a runtime's
// launch_kernel(k, config(...), decltype(params(k))(args...), "k") and launch_deduced(...)
struct Config {
    dim3 grid, block;
    size_t shared;
    PORTER_STREAM_T stream;
    Config(dim3 g, dim3 b, size_t s = 0, PORTER_STREAM_T st = 0) : grid(g), block(b), shared(s), stream(st) {}
};
inline Config config(dim3 g, dim3 b, size_t s = 0, PORTER_STREAM_T st = 0) { return Config(g, b, s, st); }

template <class T>
struct ParamOf {
    using type = std::remove_cv_t<std::remove_reference_t<T>>;
};
// The kernel's parameters as a tuple type: the launch's arguments convert to it where they are
// written (a literal 0 or NULL becomes a null pointer, a double a float), as in a direct launch.
template <class... P>
std::tuple<typename ParamOf<P>::type...> params(void (*)(P...));

struct CaptureSettings {
    std::string dir;
    unsigned limit = 3;
    size_t max_bytes = (size_t)64 << 20;
    size_t first_bytes = (size_t)1024 << 20;  // a kernel's launch while none of its launches is kept whole
};

inline const CaptureSettings* capture_settings() {
    static const CaptureSettings* s = []() -> const CaptureSettings* {
        const char* d = getenv("PORTER_CAPTURE_DIR");
        if (d == nullptr || *d == 0) return nullptr;
        CaptureSettings* c = new CaptureSettings();
        c->dir = d;
        if (const char* k = getenv("PORTER_CAPTURE_LAUNCHES")) c->limit = (unsigned)strtoul(k, nullptr, 10);
        if (const char* m = getenv("PORTER_CAPTURE_MIB")) c->max_bytes = (size_t)strtoull(m, nullptr, 10) << 20;
        if (const char* f = getenv("PORTER_CAPTURE_FIRST_MIB")) c->first_bytes = (size_t)strtoull(f, nullptr, 10) << 20;
        if (c->first_bytes < c->max_bytes) c->first_bytes = c->max_bytes;
        if (c->limit == 0) return nullptr;
        mkdir(c->dir.c_str(), 0755);
        mkdir((c->dir + "/launches").c_str(), 0755);
        mkdir((c->dir + "/arrays").c_str(), 0755);
        return c;
    }();
    return s;
}

struct KernelCount {
    std::string name;
    unsigned long long launches = 0;
    bool kept = false;       // a launch of it was captured with its arrays
    bool last_kept = false;  // ... and the last slot holds such a launch
};
inline std::vector<KernelCount>& capture_kernels() {
    static std::vector<KernelCount> k;  // by order of first launch: the kernel's index in file names
    return k;
}
inline unsigned long long g_capture_launch = 0;  // every launch of the run, captured or not

// The type's name as the compiler spells it (from __PRETTY_FUNCTION__: "... [with T = float]").
template <class T>
inline std::string type_name() {
    std::string f = __PRETTY_FUNCTION__;
    size_t at = f.find("T = ");
    if (at == std::string::npos) return "?";
    at += 4;
    size_t end = f.find_first_of(";]", at);
    return f.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The NumPy name of an arithmetic type, "" for anything else (a struct, a vector type, __half...).
template <class T>
inline const char* dtype_name() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, bool>) {
        return "bool";
    } else if constexpr (std::is_enum_v<U>) {
        return dtype_name<std::underlying_type_t<U>>();
    } else if constexpr (std::is_floating_point_v<U>) {
        return sizeof(U) == 4 ? "float32" : sizeof(U) == 8 ? "float64" : sizeof(U) == 2 ? "float16" : "";
    } else if constexpr (std::is_integral_v<U>) {
        constexpr bool s = std::is_signed_v<U>;
        switch (sizeof(U)) {
            case 1: return s ? "int8" : "uint8";
            case 2: return s ? "int16" : "uint16";
            case 4: return s ? "int32" : "uint32";
            case 8: return s ? "int64" : "uint64";
        }
        return "";
    } else {
        return "";
    }
}

inline std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += (char)c;
        }
    }
    return out + "\"";
}

inline std::string hex_bytes(const void* p, size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; ++i) {
        out += digits[b[i] >> 4];
        out += digits[b[i] & 15];
    }
    return out;
}

struct CapturedAlloc {
    uintptr_t base;
    size_t bytes;
    bool device = false;  // a symbol's bytes that are device memory (a texture's bound range)
};

// The program's __constant__ and __device__ variables at namespace scope: porter's rewrite registers
// each one (PORTER_REGISTER_SYMBOL at the end of the file declaring it), so a launch's record holds
// their contents too.  Pointer-typed symbols are not followed.
struct Symbol {
    const void* addr;
    size_t bytes;
    std::string name, element, dtype;
    size_t element_bytes;
    bool constant;
    // a texture reference (a runtime's PORTER_REGISTER_TEXTURE): what it is bound to at the launch, read
    // through these (its contents are that device memory, not the variable's own bytes)
    const void* const* bound = nullptr;
    const size_t* bound_bytes = nullptr;
};
inline std::vector<Symbol>& symbols() {
    static std::vector<Symbol> s;
    return s;
}
struct SymbolReg {
    template <class T>
    SymbolReg(T& var, const char* name, bool constant) {
        using E = std::remove_cv_t<std::remove_all_extents_t<T>>;
        if constexpr (std::is_pointer_v<E>) return;
        for (const Symbol& known : symbols())
            if (known.addr == (const void*)&var) return;  // a header's symbol, registered by each unit
        symbols().push_back({(const void*)&var, sizeof(T), name, type_name<E>(), dtype_name<E>(), sizeof(E), constant});
    }
};
#define PORTER_SYMBOL_CAT2(a, b) a##b
#define PORTER_SYMBOL_CAT(a, b) PORTER_SYMBOL_CAT2(a, b)
#define PORTER_REGISTER_SYMBOL(sym, constant) \
    static porter_emu::SymbolReg PORTER_SYMBOL_CAT(porter_symbol_, __COUNTER__)(sym, #sym, constant)

struct Capture {
    std::string json;  // the launch's arguments so far
    std::vector<CapturedAlloc> allocs;
    std::vector<CapturedAlloc> syms;  // the registered symbols, in registration order
    std::vector<std::string> files;   // the array files written for it
    std::string stem;    // k<kernel>-<launch>: its array files
    std::string record;  // k<kernel>-s<slot>: its record
    std::string dir;
    size_t total = 0;

    int alloc_index(uintptr_t base, size_t bytes) {
        for (size_t i = 0; i < allocs.size(); ++i)
            if (allocs[i].base == base) return (int)i;
        allocs.push_back({base, bytes});
        total += bytes;
        return (int)allocs.size() - 1;
    }
};

template <class T>
inline void describe_arg(Capture& cap, int index, const T& v) {
    if (index) cap.json += ",";
    cap.json += "{\"index\":" + std::to_string(index) + ",\"ctype\":" + json_string(type_name<T>());
    if constexpr (std::is_pointer_v<T>) {
        using E = std::remove_pointer_t<T>;
        size_t elem = 0;
        if constexpr (!std::is_void_v<E> && !std::is_function_v<E>) elem = sizeof(E);
        cap.json += ",\"kind\":\"pointer\",\"element\":" + json_string(type_name<E>()) +
                    ",\"element_bytes\":" + std::to_string(elem) +
                    ",\"dtype\":" + json_string(std::is_void_v<E> || std::is_function_v<E> ? "" : dtype_name<E>()) +
                    ",\"const\":" + (std::is_const_v<E> ? "true" : "false");
        if (v == nullptr) {
            cap.json += ",\"allocation\":null,\"why\":\"null pointer\"}";
            return;
        }
        std::pair<uintptr_t, size_t> a = allocation_of((const void*)v);
        if (a.first == 0) {
            cap.json += ",\"allocation\":null,\"why\":\"not a device allocation\"}";
            return;
        }
        int k = cap.alloc_index(a.first, a.second);
        cap.json += ",\"allocation\":" + std::to_string(k) +
                    ",\"offset\":" + std::to_string((uintptr_t)v - a.first) + "}";
    } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
        cap.json += std::string(",\"kind\":\"scalar\",\"dtype\":") + json_string(dtype_name<T>()) +
                    ",\"bytes\":" + std::to_string(sizeof(T)) + ",\"hex\":\"" + hex_bytes(&v, sizeof(T)) + "\"}";
    } else {
        // a struct (or vector type, __half...) by value: its bytes; a word in it that points into a
        // device allocation is a pointer porter does not follow
        bool holds = false;
        if constexpr (sizeof(T) >= sizeof(void*)) {
            for (size_t off = 0; off + sizeof(void*) <= sizeof(T); off += alignof(void*)) {
                uintptr_t word;
                memcpy(&word, (const char*)&v + off, sizeof word);
                if (word != 0 && allocation_of((const void*)word).first != 0) holds = true;
            }
        }
        cap.json += ",\"kind\":\"value\",\"dtype\":\"\",\"bytes\":" + std::to_string(sizeof(T)) +
                    ",\"align\":" + std::to_string(alignof(T)) + ",\"hex\":\"" + hex_bytes(&v, sizeof(T)) +
                    "\",\"holds_device_pointer\":" + (holds ? "true" : "false") + "}";
    }
}

inline bool write_file(const std::string& path, const void* data, size_t n) {
    FILE* f = fopen(path.c_str(), "wb");
    if (f == nullptr) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

// The file of allocation (kind "a") or symbol ("s") `i` of a launch, before or after it, relative to
// the capture folder: what the record names and what snapshot() writes.
inline std::string array_name(const Capture& cap, const char* kind, size_t i, const char* when) {
    return "arrays/" + cap.stem + "-" + kind + std::to_string(i) + "-" + when + ".bin";
}

inline void snapshot(Capture& cap, const char* when) {
    std::vector<unsigned char> scratch;
    for (const char* kind : {"a", "s"}) {
        const std::vector<CapturedAlloc>& v = kind[0] == 'a' ? cap.allocs : cap.syms;
        for (size_t i = 0; i < v.size(); ++i) {
            std::string path = cap.dir + "/" + array_name(cap, kind, i, when);
            const void* bytes = v[i].bytes == 0 ? (const void*)""  // an unbound texture: no bytes
                                                : capture_bytes(v[i].base, v[i].bytes, kind[0] == 's' && !v[i].device, scratch);
            if (bytes == nullptr)
                fprintf(stderr, "porter capture: cannot read %s\n", path.c_str());
            else if (!write_file(path, bytes, v[i].bytes))
                fprintf(stderr, "porter capture: cannot write %s: %s\n", path.c_str(), strerror(errno));
            cap.files.push_back(path);
        }
    }
}

// The exported symbol at `fn` (an executable linked with -rdynamic), or nullptr (a static or
// anonymous-namespace function).
inline const char* exported_symbol(const void* fn) {
    Dl_info info;
    if (fn == nullptr || dladdr(fn, &info) == 0 || info.dli_sname == nullptr || info.dli_saddr != fn)
        return nullptr;
    return info.dli_sname;
}

// ---- kernels by address: porter's rewrite registers each kernel a file defines at global scope
// (PORTER_REGISTER_KERNEL after the file's last line, backends/launches.py), so a launch through a
// pointer is named by its source name (a static kernel too), and a launch through the runtime's API
// with the kernel as a void* (cudaLaunchKernel) knows its parameter types: `begin` captures such a
// launch from its argument addresses, `launch` makes it through the runtime's launch_kernel.
struct KernelEntry {
    const void* fn;
    std::string name;
    Capture* (*begin)(const void* fn, const char* what, const Config& c, void** args);
    int (*launch)(const void* fn, const char* what, const Config& c, void** args);
};
inline std::vector<KernelEntry>& kernel_registry() {
    static std::vector<KernelEntry> k;
    return k;
}
inline const KernelEntry* registered_kernel(const void* fn) {
    for (const KernelEntry& e : kernel_registry())
        if (e.fn == fn) return &e;
    return nullptr;
}

// The kernel's parameters from a launch's argument addresses (cudaLaunchKernel's void** args).
template <class... P, size_t... I>
inline std::tuple<typename ParamOf<P>::type...> args_tuple(void** args, std::index_sequence<I...>) {
    return std::tuple<typename ParamOf<P>::type...>(*static_cast<typename ParamOf<P>::type*>(args[I])...);
}

// The kernel a function pointer names: the name porter registered it under, else its symbol
// (kernel_mangled_name, demangled): "transposeNaive" for a launch through a pointer variable,
// "axpby<float>" for axpby<T> written in a host template.  "" when the runtime cannot name it.
inline std::string kernel_symbol(const void* fn) {
    if (const KernelEntry* e = fn == nullptr ? nullptr : registered_kernel(fn)) return e->name;
    const char* mangled = fn == nullptr ? nullptr : kernel_mangled_name(fn);
    if (mangled == nullptr) return "";
    int status = 0;
    char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = status == 0 && plain ? plain : mangled;
    free(plain);
    size_t depth = 0, end = name.size();
    for (size_t i = 0; i < name.size(); ++i) {  // the name ends at the parameter list's '('
        char ch = name[i];
        if (ch == '<') ++depth;
        else if (ch == '>' && depth) --depth;
        else if (ch == '(' && depth == 0) { end = i; break; }
    }
    name = name.substr(0, end);
    if (name.rfind("void ", 0) == 0) name = name.substr(5);  // a function template's return type
    return name;
}

// Begin capturing a launch of `what` (nullptr: this launch is not captured).  `fn`: the kernel's
// address, when the launch has it: its symbol names the kernel (the launch's text may be a pointer
// variable or a host template's parameter), the text is kept as "written".
template <class Tuple>
inline Capture* capture_begin(const char* what, const dim3& g, const dim3& b, size_t shared, const void* stream,
                              const Tuple& args, const void* fn = nullptr) {
    const CaptureSettings* s = capture_settings();
    if (s == nullptr || !capture_allowed(stream)) return nullptr;
    std::lock_guard<std::recursive_mutex> guard(runtime_lock());
    ++g_capture_launch;
    std::string written = what ? what : "a kernel";
    std::string symbol = kernel_symbol(fn);
    std::string name = symbol.empty() ? written : symbol;
    auto& kernels = capture_kernels();
    size_t k = 0;
    while (k < kernels.size() && kernels[k].name != name) ++k;
    if (k == kernels.size()) kernels.push_back({name, 0});
    unsigned long long n = ++kernels[k].launches;
    unsigned slot;
    if (n <= s->limit) {
        slot = (unsigned)(n - 1);
    } else if ((n & (n - 1)) == 0) {  // a power of two: the last slot, taken again as the run goes on
        slot = s->limit - 1;
    } else {
        return nullptr;
    }
    Capture* cap = new Capture();
    cap->dir = s->dir;
    cap->stem = "k" + std::to_string(k) + "-" + std::to_string(n);
    cap->record = "k" + std::to_string(k) + "-s" + std::to_string(slot);
    std::apply([&](const auto&... a) {
        int i = 0;
        (describe_arg(*cap, i++, a), ...);
    }, args);
    std::string head = "{\"kernel\":" + json_string(name) + ",\"written\":" + json_string(written) +
                       ",\"kernel_index\":" + std::to_string(k) +
                       ",\"launch\":" + std::to_string(n) + ",\"sequence\":" + std::to_string(g_capture_launch) +
                       ",\"grid\":[" + std::to_string(g.x) + "," + std::to_string(g.y) + "," + std::to_string(g.z) +
                       "],\"block\":[" + std::to_string(b.x) + "," + std::to_string(b.y) + "," +
                       std::to_string(b.z) + "],\"shared_bytes\":" + std::to_string(shared) +
                       ",\"stream\":" + (stream ? "\"" + hex_bytes(&stream, sizeof stream) + "\"" : std::string("null"));
    std::string syms = ",\"symbols\":[";
    for (size_t i = 0; i < symbols().size(); ++i) {
        const Symbol& y = symbols()[i];
        uintptr_t base = (uintptr_t)y.addr;
        size_t bytes = y.bytes;
        if (y.bound != nullptr) {  // a texture: the memory bound to it now (none: unbound, or freed since)
            base = (uintptr_t)*y.bound;
            std::pair<uintptr_t, size_t> a = base ? allocation_of((const void*)base) : std::pair<uintptr_t, size_t>{0, 0};
            size_t room = a.first ? (size_t)(a.first + a.second - base) : 0;
            bytes = *y.bound_bytes < room ? *y.bound_bytes : room;
            if (bytes == 0) base = 0;
        }
        cap->syms.push_back({base, bytes, y.bound != nullptr});
        cap->total += bytes;
        // a struct variable (d_common.d_frame) with a word pointing into a device allocation: a pointer the
        // kernel may read or write through, which porter does not follow (its first 4 KiB are looked at: a
        // struct of pointers, not a large array, each word one query of the runtime's allocations)
        // (read as the launch's record reads it: through the runtime, a __constant__ living on the GPU there)
        bool holds = false;
        if (y.bound == nullptr && y.dtype.empty() && bytes >= sizeof(void*)) {
            std::vector<unsigned char> seen;
            size_t look = bytes < (size_t)4096 ? bytes : (size_t)4096;
            const unsigned char* data = (const unsigned char*)capture_bytes(base, look, true, seen);
            for (size_t off = 0; data != nullptr && !holds && off + sizeof(void*) <= look; off += alignof(void*)) {
                uintptr_t word;
                memcpy(&word, data + off, sizeof word);
                holds = word != 0 && allocation_of((const void*)word).first != 0;
            }
        }
        syms += std::string(i ? "," : "") + "{\"name\":" + json_string(y.name) + ",\"element\":" +
                json_string(y.element) + ",\"dtype\":" + json_string(y.dtype) +
                ",\"element_bytes\":" + std::to_string(y.element_bytes) + ",\"bytes\":" + std::to_string(bytes) +
                ",\"constant\":" + (y.constant ? "true" : "false") +
                (y.bound != nullptr ? ",\"texture\":true" : "") +
                (holds ? ",\"holds_device_pointer\":true" : "") + ",\"before\":\"" +
                array_name(*cap, "s", i, "before") + "\",\"after\":\"" + array_name(*cap, "s", i, "after") + "\"}";
    }
    syms += "]";
    // (a launch is captured before and after: twice its bytes on disk)
    const char* why = nullptr;
    if (cap->total > (kernels[k].kept ? s->max_bytes : s->first_bytes)) {
        why = kernels[k].kept ? "its allocations exceed the capture limit of a later launch (--capture-mib; a launch of this kernel is kept)"
                              : "its allocations exceed the capture limit (--capture-first-mib)";
    } else {
        struct statvfs fs;
        if (statvfs(s->dir.c_str(), &fs) == 0 &&
            (unsigned long long)fs.f_bavail * fs.f_frsize < 2ull * cap->total + ((size_t)64 << 20))
            why = "its allocations do not fit the free disk of the capture folder";
    }
    bool skipped = why != nullptr;
    if (skipped && slot == s->limit - 1 && n > s->limit && kernels[k].last_kept) {
        delete cap;  // keep the launch kept whole in the last slot
        return nullptr;
    }
    if (!skipped) {
        kernels[k].kept = true;
        if (slot == s->limit - 1) kernels[k].last_kept = true;
    } else if (slot == s->limit - 1) {
        kernels[k].last_kept = false;
    }
    if (skipped) {
        syms = ",\"symbols\":[]";
        cap->syms.clear();
    }
    std::string allocs = ",\"allocations\":[";
    for (size_t i = 0; i < cap->allocs.size(); ++i) {
        allocs += std::string(i ? "," : "") + "{\"index\":" + std::to_string(i) +
                  ",\"bytes\":" + std::to_string(cap->allocs[i].bytes) +
                  (skipped ? std::string(",\"before\":null,\"after\":null")
                           : ",\"before\":\"" + array_name(*cap, "a", i, "before") + "\",\"after\":\"" +
                                 array_name(*cap, "a", i, "after") + "\"") + "}";
    }
    cap->json = head + ",\"args\":[" + cap->json + "]" + allocs + "]" + syms +
                (skipped ? ",\"skipped\":" + json_string(std::string(why) + " (" + std::to_string((cap->total + (1 << 20) - 1) >> 20) + " MiB)") : std::string());
    if (skipped) cap->allocs.clear();
    capture_sync();  // what the launch reads: everything queued before it
    snapshot(*cap, "before");
    return cap;
}

// The launch is done (`status`: its error code): the arrays after it, and the launch's record.
inline std::map<std::string, std::vector<std::string>>& slot_arrays() {
    static std::map<std::string, std::vector<std::string>> files;  // record -> the array files it names
    return files;
}

inline void capture_end(Capture* cap, int status) {
    if (cap == nullptr) return;
    std::lock_guard<std::recursive_mutex> guard(runtime_lock());
    int done = capture_sync();  // what the launch left (and how it ended)
    if (status == 0) status = done;
    snapshot(*cap, "after");
    std::string doc = cap->json + ",\"status\":" + std::to_string(status) + "}\n";
    std::string path = cap->dir + "/launches/" + cap->record + ".json";
    std::string tmp = path + ".tmp";
    if (write_file(tmp, doc.data(), doc.size()) && rename(tmp.c_str(), path.c_str()) == 0) {
        std::vector<std::string>& old = slot_arrays()[cap->record];
        for (const std::string& f : old) remove(f.c_str());  // the launch this record replaced
        old = cap->files;
    }
    delete cap;
}

template <class... P>
inline Capture* args_begin(const void* fn, const char* what, const Config& c, void** args) {
    if (capture_settings() == nullptr) return nullptr;
    if (args == nullptr && sizeof...(P) > 0) return nullptr;
    std::tuple<typename ParamOf<P>::type...> t = args_tuple<P...>(args, std::index_sequence_for<P...>{});
    return capture_begin(what, c.grid, c.block, c.shared, (const void*)c.stream, t, fn);
}
// (the runtime's launch_kernel is found by argument-dependent lookup where a kernel is registered)
template <class... P>
inline int args_launch(const void* fn, const char* what, const Config& c, void** args) {
    void (*k)(P...) = reinterpret_cast<void (*)(P...)>(const_cast<void*>(fn));
    std::tuple<typename ParamOf<P>::type...> t = args_tuple<P...>(args, std::index_sequence_for<P...>{});
    if constexpr (std::is_void_v<decltype(launch_kernel(k, c, t, what))>) {
        launch_kernel(k, c, t, what);
        return 0;
    } else {
        return (int)launch_kernel(k, c, t, what);
    }
}
struct KernelReg {
    template <class... P>
    KernelReg(void (*k)(P...), const char* name) {
        const void* fn = reinterpret_cast<const void*>(k);
        if (registered_kernel(fn) == nullptr) kernel_registry().push_back({fn, name, &args_begin<P...>, &args_launch<P...>});
    }
};
#define PORTER_REGISTER_KERNEL(k) \
    static porter_emu::KernelReg PORTER_SYMBOL_CAT(porter_kernel_, __COUNTER__)(k, #k)

}  // namespace porter_emu

#endif  // PORTER_CAPTURE_H
