"""Scan throughput benchmark: generate a multi-MB CUDA corpus and time `porter scan` on it.

Run:  python bench/bench_scan.py [--mb 4] [--repeat 3] [--keep DIR] [--dense] [--jobs N]
      python bench/bench_scan.py --real /usr/local/cuda/include/cccl/cub -I /usr/local/cuda/include/cccl

Reports MB/s and kernels/s end to end (file discovery, qualifier macros, read, parse, extraction,
hazards; then also the `--json` document) on one core (CPU time of this single-threaded process,
so other load on the machine distorts it less), next to tree-sitter's bare CUDA parse rate on the
same bytes; with ``--jobs`` also the wall-clock rate of the multi-process scan.  ``--real`` scans
existing code instead of the generated corpus.  Not a test: nothing here asserts time.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

UNIT_TEMPLATES = (
    """
#define BLOCK_{i} 256
__device__ __forceinline__ float relu_{i}(float x) {{ return x > 0.0f ? x : 0.0f; }}

__device__ void store_{i}(float* out, int idx, float v) {{ out[idx] = v; }}

__global__ void saxpy_{i}(int n, float a, const float* __restrict__ x, float* __restrict__ y) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        y[i] = a * x[i] + y[i];
    }}
}}

__global__ void __launch_bounds__(BLOCK_{i}) act_{i}(const float* in, float* out, int n) {{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {{
        store_{i}(out, i, relu_{i}(in[i]));
    }}
}}
""",
    """
template <typename T, int TILE>
__global__ void matmul_{i}(const T* A, const T* B, T* C, int M, int N, int K) {{
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    T acc = 0;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {{
        As[threadIdx.y][threadIdx.x] = (row < M && t * TILE + threadIdx.x < K) ? A[row * K + t * TILE + threadIdx.x] : T(0);
        Bs[threadIdx.y][threadIdx.x] = (col < N && t * TILE + threadIdx.y < K) ? B[(t * TILE + threadIdx.y) * N + col] : T(0);
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }}
    if (row < M && col < N) C[row * N + col] = acc;
}}
""",
    """
__inline__ __device__ float warp_sum_{i}(float v) {{
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}}

__global__ void reduce_{i}(const float* in, float* out, unsigned int n) {{
    extern __shared__ float partial[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
    float v = 0.0f;
    if (i < n) v = in[i];
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    v = warp_sum_{i}(v);
    int lane = tid % 32;
    int warp = tid / 32;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {{
        v = (tid < blockDim.x / 32) ? partial[lane] : 0.0f;
        v = warp_sum_{i}(v);
        if (tid == 0) atomicAdd(out, v);
    }}
}}

__global__ void histogram_{i}(const unsigned char* data, unsigned int* bins, int n) {{
    __shared__ unsigned int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += blockDim.x * gridDim.x)
        atomicAdd(&local[data[j]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}}
""",
    """
static void check_{i}(cudaError_t err, const char* what) {{
    if (err != cudaSuccess) {{
        fprintf(stderr, "%s: %s\\n", what, cudaGetErrorString(err));
        exit(1);
    }}
}}

int run_{i}(int argc, char** argv) {{
    int n = 1 << 20;
    const float a = 2.0f;
    if (argc > 1) n = atoi(argv[1]);
    size_t bytes = n * sizeof(float);
    float* hx = (float*)malloc(bytes);
    float* hy = new float[n];
    for (int j = 0; j < n; ++j) {{ hx[j] = 1.0f * j; hy[j] = 2.0f; }}
    float *dx, *dy, *dsum;
    check_{i}(cudaMalloc(&dx, bytes), "cudaMalloc x");
    check_{i}(cudaMalloc((void**)&dy, bytes), "cudaMalloc y");
    cudaMallocManaged(&dsum, sizeof(float));
    cudaMemcpy(dx, hx, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, hy, bytes, cudaMemcpyHostToDevice);
    cudaStream_t s;
    cudaStreamCreate(&s);
    saxpy_{j}<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    act_{j}<<<dim3(128), dim3(BLOCK_{j}), 0, s>>>(dx, dy, n);
    reduce_{j}<<<(n + 511) / 512, 256, 8 * sizeof(float), s>>>(dx, dsum, n);
    dim3 block(16, 16), grid((n + 15) / 16, (n + 15) / 16);
    matmul_{j}<float, 16><<<grid, block>>>(dx, dy, dx, 1024, 1024, 1024);
    cudaDeviceSynchronize();
    cudaMemcpy(hy, dy, bytes, cudaMemcpyDeviceToHost);
    double err = 0.0;
    for (int j = 0; j < n; ++j) err = fmax(err, fabs(hy[j] - (a * j + 2.0f)));
    printf("max error %g\\n", err);
    cudaFree(dx); cudaFree(dy); cudaFree(dsum);
    free(hx); delete[] hy;
    return err < 1e-5 ? 0 : 1;
}}
""",
)

HEADER = "#include <cstdio>\n#include <cstdlib>\n#include <cmath>\n#include <cuda_runtime.h>\n"

# Real CUDA code carries licence headers and doc comments (the CUDA samples run at roughly a
# quarter to a third comment bytes); "commented" corpora prefix each unit with one such block.
LICENCE = """/*
 * Copyright (c) the porter benchmark authors.  Licensed under the Apache License, Version 2.0.
 * This file is generated by bench/bench_scan.py to measure scan throughput; it is not compiled.
 */
"""
DOC = """
/**
 * Unit {i}: {what}.
 *
 * Each thread handles one element (grid-stride where noted); inputs are read once through the
 * read-only path and outputs are written with coalesced stores.  Launch with enough blocks to
 * fill the device; the host code below checks the result against a CPU reference.
 */"""
WHAT = (
    "element-wise kernels and their device helpers",
    "shared-memory tiled matrix multiply",
    "warp-shuffle reduction and a shared-memory histogram",
    "host driver with allocations and launches",
)


def generate(target_bytes: int, seed: int = 0, commented: bool = True) -> str:
    """A CUDA translation unit of about ``target_bytes`` made of realistic kernels and host code."""
    rng = random.Random(seed)
    parts = [LICENCE + HEADER if commented else HEADER]
    size = len(parts[0])
    i = 0
    while size < target_bytes:
        # the host unit launches the kernels of the group it belongs to
        group = i - i % len(UNIT_TEMPLATES)
        for k, template in enumerate(UNIT_TEMPLATES):
            text = template.format(i=i, j=group)
            if commented:
                text = DOC.format(i=i, what=WHAT[k]) + text
            parts.append(text)
            size += len(text)
            i += 1
        if rng.random() < 0.1:
            parts.append(f"// padding comment {rng.random():.6f}\n")
    return "".join(parts)


def write_corpus(directory: Path, total_mb: float, files: int = 8, commented: bool = True) -> list[Path]:
    per_file = int(total_mb * 1_000_000 / files)
    paths = []
    for k in range(files):
        path = directory / f"corpus_{k}.cu"
        path.write_text(generate(per_file, seed=k, commented=commented), encoding="utf-8")
        paths.append(path)
    return paths


def _files(roots: list[Path]) -> list[Path]:
    """The files `porter scan` would scan under ``roots`` (CUDA, CUDA-bearing C++; no Python)."""
    from porter.scan import PYTHON_SUFFIXES, _candidates, language_for

    out = []
    for root in roots:
        for f in _candidates(root) if root.is_dir() else [root]:
            if f.suffix.lower() not in PYTHON_SUFFIXES and language_for(str(f), f.read_bytes()) == "cuda":
                out.append(f)
    return out


def bench(
    paths: list[Path], repeat: int, jobs: int = 1, include_dirs: list[Path] | None = None
) -> dict[str, float]:
    import json

    from porter.grammars import language, parser
    from tree_sitter import Query, QueryCursor

    from porter.report import scan_view
    from porter.scan import scan_paths

    data = [p.read_bytes() for p in paths]
    total = sum(len(d) for d in data)
    names = [str(x) for x in paths]
    p = parser("cuda")
    parse_times: list[float] = []
    for _ in range(repeat):
        t0 = time.process_time()
        for d in data:
            p.parse(d)
        parse_times.append(time.process_time() - t0)
    # The floor under any extraction that looks at every node: parse, then one pass of
    # tree-sitter's own (C) query cursor over the whole tree with a pattern that (nearly) never
    # matches, so no Python work is done per node.
    walk = Query(language("cuda"), "(ERROR (ERROR (ERROR))) @never")
    walk_times: list[float] = []
    nodes = 0
    for _ in range(repeat):
        t0 = time.process_time()
        nodes = 0
        for d in data:
            root = p.parse(d).root_node
            QueryCursor(walk).matches(root)
            nodes += root.descendant_count
        walk_times.append(time.process_time() - t0)
    scan_times, json_times, wall_times = [], [], []
    kernels = 0
    for _ in range(repeat):
        t0 = time.process_time()
        result = scan_paths(names, jobs=1, include_dirs=include_dirs or ())
        t1 = time.process_time()
        json.dumps(scan_view.to_json(result))
        t2 = time.process_time()
        scan_times.append(t1 - t0)
        json_times.append(t2 - t0)
        kernels = sum(len(f.kernels) for f in result.files)
        if jobs != 1:
            w0 = time.perf_counter()
            scan_paths(names, jobs=jobs, include_dirs=include_dirs or ())
            wall_times.append(time.perf_counter() - w0)
    parse_s = statistics.median(parse_times)
    walk_s = statistics.median(walk_times)
    scan_s = statistics.median(scan_times)
    json_s = statistics.median(json_times)
    out = {
        "bytes": total,
        "kernels": kernels,
        "nodes": nodes,
        "parse_mb_s": total / 1e6 / parse_s,
        "walk_mb_s": total / 1e6 / walk_s,
        "scan_mb_s": total / 1e6 / scan_s,
        "json_mb_s": total / 1e6 / json_s,
        "kernels_s": kernels / scan_s,
        "scan_s": scan_s,
    }
    if wall_times:
        out["wall_s"] = statistics.median(wall_times)
        out["wall_mb_s"] = total / 1e6 / out["wall_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    from porter.scan import default_jobs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=4.0, help="corpus size in MB (default 4)")
    ap.add_argument("--files", type=int, default=8, help="number of corpus files (default 8)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions; the median is reported")
    ap.add_argument("--keep", type=Path, help="write the corpus here and keep it")
    ap.add_argument("--dense", action="store_true", help="no comments at all (worst case for the parser)")
    ap.add_argument(
        "--real",
        type=Path,
        action="append",
        help="scan these existing files or folders instead of a generated corpus (repeatable), e.g. "
        "the CCCL headers of a CUDA toolkit: /usr/local/cuda/include/cccl/cub",
    )
    ap.add_argument(
        "-I",
        "--include",
        type=Path,
        action="append",
        default=[],
        help="include directories for the macro table, as `porter scan -I` (repeatable), e.g. "
        "/usr/local/cuda/include/cccl",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="also time `scan_paths(jobs=N)` in wall-clock time (0: one worker per CPU)",
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.real:
            paths = _files(args.real)
            style = "real code: " + ", ".join(str(r) for r in args.real)
        else:
            directory = args.keep or Path(tmp)
            directory.mkdir(parents=True, exist_ok=True)
            paths = write_corpus(directory, args.mb, args.files, commented=not args.dense)
            style = "dense, no comments" if args.dense else "with licence and doc comments"
        r = bench(paths, args.repeat, args.jobs, args.include)
    print(f"date      {date.today().isoformat()}")
    print(
        f"machine   {platform.machine()} {platform.processor() or ''} {platform.python_implementation()} "
        f"{platform.python_version()} ({platform.system()}), {default_jobs()} usable CPUs"
    )
    print(f"corpus    {r['bytes'] / 1e6:.2f} MB in {len(paths)} files ({style}), {r['kernels']} kernels")
    print(f"parse     {r['parse_mb_s']:.2f} MB/s (tree-sitter CUDA parse only, one core)")
    print(
        f"floor     {r['walk_mb_s']:.2f} MB/s (parse + one C-level pass over all {r['nodes']} nodes: "
        "the most any extraction reading every node can reach, one core)"
    )
    print(
        f"scan      {r['scan_mb_s']:.2f} MB/s, {r['kernels_s']:.0f} kernels/s ({r['scan_s']:.2f} s CPU, one core)"
    )
    print(f"scan+json {r['json_mb_s']:.2f} MB/s (scan and the --json document, one core)")
    if "wall_s" in r:
        print(f"parallel  {r['wall_mb_s']:.2f} MB/s wall clock with --jobs {args.jobs} ({r['wall_s']:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
