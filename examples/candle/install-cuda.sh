#!/usr/bin/env bash
# Installs what building the candle example needs on a machine with no CUDA toolkit:
# CUDA 13.0's compiler, headers and libraries from PyPI's pinned wheels (never newer:
# the H200's driver is CUDA 13.0 and rejects newer PTX), plus a link-time stand-in
# for libcuda.so. Everything goes under one folder (default: target/cuda-13.0 at the
# repository root, which git ignores); nothing outside it changes.
#
#   examples/candle/install-cuda.sh [DIR]
#   source DIR/env.sh        # CUDA_ROOT, PATH (nvcc), CUDA_COMPUTE_CAP=90
#
# The wheels: nvcc, NVVM, the C runtime's and CRT's headers, CCCL (candle-kernels'
# nvcc build), cuBLAS, cuRAND and NVRTC (candle links them: cudarc's
# `dynamic-linking`). The wheels carry versioned libraries only (libcublas.so.13),
# so the unversioned names the linker's -l looks for are made as links beside them.
#
# libcuda.so comes with the GPU driver, not with the toolkit, and a machine without a
# GPU has none: the linker gets a stub instead, a shared library named libcuda.so.1
# (its SONAME) that defines every function of cuda.h and cudaProfiler.h (the headers
# cudarc's driver bindings come from) as an empty one. A program linked against it records
# NEEDED libcuda.so.1 and at run time loads the real driver; the stub is never run.
# Running twice is quick: pip finds the wheels installed and the stub is rebuilt.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$repo/target/cuda-13.0}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

wheels=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-cccl==13.0.85
  nvidia-cublas==13.0.2.14
  nvidia-curand==10.4.0.35
  nvidia-cuda-nvrtc==13.0.88
)
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --upgrade \
  --target "$dir/wheels" "${wheels[@]}"
root=$dir/wheels/nvidia/cu13
"$root/bin/nvcc" --version | tail -n 1

# Unversioned names for the linker.
for lib in cublas cublasLt curand nvrtc cudart; do
  versioned=$(cd "$root/lib" && ls "lib$lib.so."* | grep -E "^lib$lib\.so\.[0-9]+$" | head -n 1)
  ln -sfn "$versioned" "$root/lib/lib$lib.so"
done

# The link-time libcuda stub, from the headers' declarations after the preprocessor
# (which turns cuMemAlloc into cuMemAlloc_v2, the name the driver exports), with and
# without the per-thread default stream's names (_ptsz, _ptds). The wheels lack
# cudaProfiler.h: its two functions are named here.
mkdir -p "$root/lib/stubs"
stub_c=$root/lib/stubs/libcuda-stub.c
for define in "" -DCUDA_API_PER_THREAD_DEFAULT_STREAM; do
  printf '#include <cuda.h>\n' | gcc -E $define -I "$root/include" -x c -
done | cat - <(echo 'cuProfilerStart( cuProfilerStop(') | tr '\n' ' ' | grep -oE '\bcu[A-Z][A-Za-z0-9_]* *\(' | sed 's/ *($//' | sort -u \
  | sed 's/.*/void &(void) {}/' > "$stub_c"
gcc -shared -fPIC -o "$root/lib/stubs/libcuda.so" -Wl,-soname,libcuda.so.1 "$stub_c"
echo "libcuda stub: $(wc -l < "$stub_c") functions, SONAME libcuda.so.1"

cat > "$dir/env.sh" <<ENV
# Source this before building examples/candle (written by install-cuda.sh).
export CUDA_ROOT="$root"
export PATH="$root/bin:\$PATH"
# candle-kernels compiles its kernels for this compute capability (the H200's: 9.0);
# without it, its build script asks nvidia-smi, which a machine without a GPU lacks.
export CUDA_COMPUTE_CAP=\${CUDA_COMPUTE_CAP:-90}
ENV
echo "installed under $dir; now: source $dir/env.sh"
