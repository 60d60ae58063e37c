#!/usr/bin/env bash
# Compile-checks every source that includes torch (csrc/backend: every room, gpu/ included, and
# the face; csrc/pyext's module is torch-free and is not among them) against another torch's
# headers, as the CUDA build compiles them: `scripts/check_torch_headers.sh 2.11.0`.
#
#   1. The torch wheel of that version is fetched once into build/torch-wheels/ (pip download,
#      the default index's wheel: a CUDA build) and reused while it is there.
#   2. Only torch/include and torch/version.py are extracted, into build/torch<version>-headers/
#      (the wheel's libraries are never unpacked: nothing is linked).
#   3. CMake configures xccl there with XCCL_TORCH_ROOT pointing at that tree and XCCL_GPU=ON
#      (the CUDA version from the wheel's version.py), exporting compile_commands.json. That is
#      the real CUDA build's configuration: its defines (USE_CUDA, the C++ ABI, ...), the rooms'
#      include roots, and backend/torch_features.h generated from THAT torch's Backend.hpp by
#      csrc/backend/CMakeLists.txt's own feature detection.
#   4. Every compile command that sees torch's headers is run with -fsyntax-only.
# Prints "compiled against torch <version>: N of M sources" and exits non-zero on any error.
# Nothing is linked and nothing runs: a symbol the headers declare but that version's libraries
# lack is not caught here.
#
# Needs python3 with pip (the first run downloads the wheel, about 530 MB), CMake, a C++
# compiler and nvcc of the wheel's CUDA major version (CUDACXX or PATH), as XCCL_GPU=ON needs.
# With the wheel cached: configure about 10 s, then one syntax-only compile per source of
# csrc/backend (52 today), about 10 s of CPU time each (40 sources took about 4 minutes on 2 free
# cores, 7 on 2 cores shared with other builds).
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:?usage: scripts/check_torch_headers.sh TORCH_VERSION (e.g. 2.11.0)}"
started=$SECONDS
wheels="build/torch-wheels"
tree="$PWD/build/torch$version-headers"

wheel="$(ls "$wheels"/torch-"$version"-*.whl 2>/dev/null | head -n1 || true)"
if [[ -z "$wheel" ]]; then
  mkdir -p "$wheels"
  python3 -m pip download -q "torch==$version" --no-deps -d "$wheels"
  wheel="$(ls "$wheels"/torch-"$version"-*.whl | head -n1)"
fi
# The extracted tree is keyed by the wheel it came from: a different wheel re-extracts.
if [[ "$(cat "$tree/wheel" 2>/dev/null)" != "$(basename "$wheel")" ]]; then
  rm -rf "$tree"
  mkdir -p "$tree"
  # Python's zipfile, not unzip: python3 is here wherever torch is.
  python3 - "$wheel" "$tree" <<'PY'
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = [n for n in wheel.namelist()
             if n.startswith("torch/include/") or n == "torch/version.py"]
    wheel.extractall(sys.argv[2], names)
PY
  basename "$wheel" >"$tree/wheel"
fi
torch_cuda="$(sed -n "s/^cuda[^=]*= *'\([0-9.]*\)'.*/\1/p" "$tree/torch/version.py")"
if [[ -z "$torch_cuda" || ! -f "$tree/torch/include/c10/cuda/CUDAStream.h" ]]; then
  echo "check_torch_headers: $(basename "$wheel") is not a CUDA build of torch: the GPU sources" \
       "cannot be checked against it" >&2
  exit 1
fi

build="$tree/cmake"
cmake -S . -B "$build" -G "$(command -v ninja >/dev/null && echo Ninja || echo 'Unix Makefiles')" \
  -DXCCL_TORCH_ROOT="$tree/torch" -DXCCL_TORCH_CUDA="$torch_cuda" -DXCCL_GPU=ON \
  -DXCCL_BUILD_TESTS=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DPython3_EXECUTABLE="$(command -v python3)" \
  -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log" >&2; echo "check_torch_headers: configure FAILED" >&2; exit 1; }
grep -q '^#define XCCL_WITH_CUDA 1' "$build/generated/common/common/config.h" ||
  { echo "check_torch_headers: the configure did not turn the GPU parts on" >&2; exit 1; }

# One line per source: "<source>\t<command as -fsyntax-only>", for every command that has this
# tree's torch/include on its include path.
jobs="$build/syntax-jobs"
python3 - "$build/compile_commands.json" "$tree/torch/include" >"$jobs" <<'EOF'
import json, shlex, sys
commands, include = json.load(open(sys.argv[1])), "-I" + sys.argv[2]
for entry in commands:
    args = shlex.split(entry["command"])
    if include not in args:
        continue
    out = args.index("-o")
    del args[out : out + 2]
    args[args.index("-c")] = "-fsyntax-only"
    print(entry["file"], shlex.join(args), sep="\t")
EOF
total=$(wc -l <"$jobs")
# Every .cc under csrc/backend must be among them: a source CMake stopped listing is not checked.
expected=$(find csrc/backend -name '*.cc' | wc -l)
if [[ $total -ne $expected ]]; then
  echo "check_torch_headers: $total compile commands see torch, but csrc/backend has $expected" \
       ".cc files" >&2
  exit 1
fi

# check N: runs the Nth line's command from the build folder (where CMake runs it).
check() {
  local source command log
  IFS=$'\t' read -r source command < <(sed -n "$1p" "$jobs")
  if log="$(cd "$build" && eval "$command" 2>&1)"; then
    printf '  ok      %s\n' "${source#"$root"/}"
    return 0
  fi
  printf '  FAILED  %s\n%s\n' "${source#"$root"/}" "$(sed 's/^/    /' <<<"$log")"
  return 1
}
export -f check
export jobs build root="$PWD"
status=0
seq 1 "$total" | xargs -P "$(nproc)" -n 1 bash -c 'check "$1"' _ | tee "$build/syntax.log" ||
  status=1
passed=$(grep -c '^  ok ' "$build/syntax.log" || true)
echo "compiled against torch $version: $passed of $total sources ($((SECONDS - started)) s)"
[[ $status -eq 0 && $passed -eq $total ]]
