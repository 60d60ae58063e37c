#!/usr/bin/env bash
# The format and lint check: clang-format (the repository's .clang-format) over the C/C++/CUDA
# sources, then ruff's linter and formatter (pyproject.toml's [tool.ruff]) over the Python.
# Changes nothing; exits non-zero when any of the three finds something, after running all three.
#
#   scripts/check_format.sh
#
# Needs clang-format-19 (or CLANG_FORMAT naming another clang-format 19) and ruff on PATH;
# .ci/run installs both (ruff pinned: another version formats differently). To fix what it
# reports: `clang-format-19 -i FILE...`, `ruff check --fix`, `ruff format`.
set -uo pipefail
cd "$(dirname "$0")/.."

clang_format="${CLANG_FORMAT:-clang-format-19}"
for tool in "$clang_format" ruff; do
  if ! command -v "$tool" > /dev/null; then
    echo "check_format: $tool not found on PATH" >&2
    exit 2
  fi
done

failed=()
# Tracked and new (not ignored) files, so build folders and .site/ never count.
mapfile -t sources < <(git ls-files --cached --others --exclude-standard -- \
  'csrc/*' 'tests/cpp/*' 'tests/model/*' |
  grep -E '\.(c|cc|cpp|h|hpp|cu|cuh|inc)$')
if ((${#sources[@]})) && ! "$clang_format" --dry-run -Werror "${sources[@]}"; then
  failed+=("clang-format (fix: $clang_format -i FILE...)")
fi
if ! ruff check .; then
  failed+=("ruff check (fix: ruff check --fix, or by hand)")
fi
if ! ruff format --check .; then
  failed+=("ruff format (fix: ruff format)")
fi

if ((${#failed[@]})); then
  echo "check_format: FAILED:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "check_format: clang-format, ruff check and ruff format --check found nothing"
