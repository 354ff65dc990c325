#!/usr/bin/env bash
# System packages porter's full test suite uses, from Debian/Ubuntu's own archives:
#   g++            CPU emulation of CUDA/HIP kernels, and whole programs on porter's CPU runtime
#   make           a program's own build (`porter port --build make`)
#   cmake          a suite's [ctest] table from a real CMake build (ctest --show-only=json-v1)
#   strace         names the file an original that fails tried to open (watched from outside its jail)
#   pocl-opencl-icd + ocl-icd-libopencl1   an OpenCL CPU device
#   oclgrind       the OpenCL memory/race checker
#   hipcc, clang-19  HIP device compiles for AMD targets (gfx90a/gfx940, gfx942)
#   libomp-N-dev   OpenMP's omp.h for the clang hipcc runs (N: the clang-N hipcc depends on), as a ROCm
#                  install has it: HIP files that include <omp.h> (rodinia's kmeans) compile for AMD
#   libgl-dev    GL headers, for CUDA's cuda_gl_interop.h under HIP-on-CUDA's GL interop names
#   python3-venv   the virtual environment the README's commands create
#   bubblewrap, libseccomp2   the sandbox of every child that runs code (PID/network namespaces,
#                  read-only root; the seccomp filter)
set -euo pipefail
pkgs=(g++ make cmake strace python3-venv python3-dev pocl-opencl-icd ocl-icd-libopencl1 oclgrind hipcc clang-19 libgl-dev bubblewrap libseccomp2)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# omp.h for hipcc's own clang (Debian 12: clang-15), which GCC's omp.h does not serve
llvm=$(apt-cache depends hipcc 2>/dev/null | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -1)
if [ -n "$llvm" ] && ! dpkg -s "libomp-$llvm-dev" >/dev/null 2>&1; then
  omp=(env DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "libomp-$llvm-dev")
  "${omp[@]}" || { $SUDO apt-get update -q && "${omp[@]}"; }
fi
