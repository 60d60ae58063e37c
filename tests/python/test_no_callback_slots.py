"""No process-global slot holds a callback: what a group calls back into Python for comes with the
group (its GroupPolicy, csrc/backend/core/group_policy.h, set in ProcessGroupXccl.Options.policy).

The rule, checked over every C++/CUDA source under csrc/ with comments and string literals blanked:
a variable declared `static` or `thread_local` (at namespace scope, in a class or in a function)
whose type mentions `std::function`, or a name declared as an alias of one
(`using Name = std::function<...>`, wherever in csrc/), is a slot, and none may exist. Such a
variable outlives every group and is shared by all of them, which is what the policy replaced.
A `static` function returning a std::function (the name followed by `(`) is not a slot, nor is a
std::function member or local: each belongs to one object or one call.

And the old registration names are gone everywhere (csrc/, python/, tests/, docs/, README.md,
benchmarks/, scripts/), so that no caller keeps using a removed function.
"""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPP_SUFFIXES = (".h", ".cc", ".cu", ".cuh", ".inc", ".h.in")
# The removed functions: C++ setters and the xccl._C functions that called them.
OLD_NAMES = (
    "setVendorFactory",
    "setKernelCheck",
    "setTuningSource",
    "_set_vendor_factory",
    "_set_kernel_check",
    "_set_tuning_source",
)
TEXT_FOLDERS = ("csrc", "python", "tests", "docs", "benchmarks", "scripts")


def _files(folders, suffixes):
    for folder in folders:
        for here, dirs, names in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
            for name in names:
                if name.endswith(suffixes):
                    yield os.path.join(here, name)


def _code(text: str) -> str:
    """`text` with C++ comments and string/char literals replaced by spaces (lines kept)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    pattern = r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    return re.sub(pattern, blank, text, flags=re.S)


def _balanced(code: str, i: int) -> int:
    """The index just past the <...> that opens at code[i]; -1 when unbalanced."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "<":
            depth += 1
        elif code[j] == ">":
            depth -= 1
            if depth == 0:
                return j + 1
        elif code[j] in ";{}":
            return -1
    return -1


def _slots(code: str, aliases: set[str]) -> list[tuple[int, str]]:
    """(line, declaration) of each static or thread_local variable whose type holds a callback."""
    found = []
    callback = re.compile(r"\bstd::function\b" + "".join(rf"|\b{a}\b" for a in sorted(aliases)))
    for m in re.finditer(r"\b(?:static|thread_local)\b", code):
        i = m.end()
        # The type: words, ::, * and &, and balanced <...>, up to the declarator's name.
        words = []
        while True:
            w = re.compile(r"\s*([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|::|[*&])").match(code, i)
            if not w:
                break
            i = w.end()
            words.append(w.group(1))
            if code[i : i + 1] == "<":
                end = _balanced(code, i)
                if end < 0:
                    break
                words.append(code[i:end])
                i = end
        after = re.compile(r"\s*(.)").match(code, i)
        if len(words) < 2 or not after or after.group(1) not in ";={[":
            continue  # not a variable: a function, a static_assert, `static` alone
        declared = " ".join(words[:-1])
        if callback.search(declared):
            found.append((code.count("\n", 0, m.start()) + 1, " ".join(words)))
    return found


def _cpp_sources():
    return {
        path: _code(open(path, encoding="utf-8").read()) for path in _files(["csrc"], CPP_SUFFIXES)
    }


def test_the_rule_finds_slots():
    """The rule itself: each way the removed slots were written is found, the allowed shapes not."""
    aliases = {"TuningSource"}
    code = _code(
        "using TuningSource = std::function<int()>;\n"
        "TuningSource& slot() {\n  static TuningSource source;\n  return source;\n}\n"
        "static std::function<c10::intrusive_ptr<c10d::Backend>(int, const std::string&)> f;\n"
        "static std::map<int, std::vector<std::function<void()>>> hooks{};\n"
        "thread_local const TuningSource* current = nullptr;\n"
        "// static std::function<void()> inComment;\n"
        "static std::function<void()> makeOne(int x);\n"
        "struct S { std::function<void()> member; static constexpr int kCount = 4; };\n"
        "static int counter = 0;\n"
    )
    assert [line for line, _ in _slots(code, aliases)] == [3, 6, 7, 8]


def test_no_static_callback_slot_in_csrc():
    sources = _cpp_sources()
    aliases = set()
    for code in sources.values():
        aliases.update(re.findall(r"\busing\s+(\w+)\s*=\s*std::function\b", code))
    assert "TuningSource" in aliases and "KernelCheck" in aliases, "group_policy.h's aliases"
    found = [
        f"{os.path.relpath(path, ROOT)}:{line}: {decl}"
        for path, code in sorted(sources.items())
        for line, decl in _slots(code, aliases)
    ]
    assert not found, "process-global callback slots (use the group's GroupPolicy):\n" + "\n".join(
        found
    )


def test_the_old_registration_functions_are_gone():
    me = os.path.abspath(__file__)
    found = []
    paths = list(_files(TEXT_FOLDERS, CPP_SUFFIXES + (".py", ".md", ".sh", ".txt")))
    for path in paths + [os.path.join(ROOT, "README.md")]:
        if os.path.abspath(path) == me:
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        found += [f"{os.path.relpath(path, ROOT)}: {n}" for n in OLD_NAMES if n in text]
    assert not found, "\n".join(found)
