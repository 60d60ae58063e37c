"""The plan vocabulary has one source: csrc/common/vocabulary.h.

Every name of a collective, route, algorithm, GPU kernel, XCCL_GPU_ALGO choice, locality and
vendor library is declared there once, with the legal combinations; C++ derives the planners,
the tuning table's parser, XCCL_ALGO and XCCL_GPU_ALGO from it, and Python reads it through
xccl._native.vocabulary() (python/xccl/vocabulary.py). These tests check that Python's tables are
the native ones, that the parser and Python agree on which triples are legal, and that no name is
spelled anywhere else.

What counts as spelling a name (the rule test_no_name_is_spelled_elsewhere enforces): a string
literal of C++ code ("...", outside comments) or of Python code (a plain str token) in csrc/ or
python/xccl/ whose whole text is a vocabulary name. Text that merely contains a name (a reason,
an error message, a docstring) is prose, not a spelling. Two kinds of names have other meanings
in the code and are checked only in the files that speak the plan (PLAN_FILES):
  - collective names: they are also torch.distributed's operation names, which the benchmark,
    the doctor and the tuner's drivers call by name;
  - OTHER_MEANINGS below, each with the meaning it has elsewhere (an engine, a log tag, ...).
Everything else (one_shot, direct, hierarchical, per_host, ...) may be spelled nowhere but the
table. ALLOWED lists the few remaining places, each with why.
"""

import ast
import io
import os
import re
import tokenize

import pytest
from xccl import _native, tuning_schema, vocabulary
from xccl.tune import candidates

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = {"csrc/common/vocabulary.h", "csrc/common/vocabulary.cc"}
# The files that speak the plan: here even the words of OTHER_MEANINGS and collective names
# must come from the table.
PLAN_FILES = (
    "csrc/algo/",
    "python/xccl/vocabulary.py",
    "python/xccl/tuning.py",
    "python/xccl/tuning_schema.py",
    "python/xccl/tune/candidates.py",
    "python/xccl/tune/verdict.py",
    "python/xccl/tune/summary.py",
)
OTHER_MEANINGS = {
    "tcp": "the TCP engine (net/transport/factory.h) and its log tag",
    "shm": "the shared-memory log tag, store prefix and doctor check",
    "host": "store keys of the host census",
    "kernel": "a doctor pass's name",
    "vendor": "the topology's GPU vendor field and XCCL_GPU_ALGO's synonym",
    "local": "(kept with host: route words that are ordinary English)",
    "none": "option values of the command line tools",
    "auto": "option values of the command line tools and of other XCCL_* variables",
    "nccl": "torch's backend name (benchmark and doctor baselines)",
    "rccl": "torch's backend name (benchmark and doctor baselines)",
    "other": "(an ordinary word)",
}
# (file, name): why the name is spelled there.
ALLOWED = {
    ("python/xccl/doctor/gpu_check.py", "two_shot"): "XCCL_GPU_ALGO's value for the doctor's "
    "second pass (the doctor is outside the plan files)",
    ("csrc/algo/tuning_agree.cc", "host"): "the store key of a rank's host identity",
    ("python/xccl/tuning.py", "kernel"): "the table file's field name",
    ("python/xccl/tuning_schema.py", "kernel"): "the table file's field name",
    ("python/xccl/tune/verdict.py", "kernel"): "the table file's field name",
}


def names() -> dict:
    """Every vocabulary name -> whether it is a collective."""
    rows = _native.vocabulary()
    found = {}
    for name, *_ in rows["collectives"] + rows["gpu_collectives"]:
        found[name] = True
    for name, family, _ in rows["gpu_kernels"]:
        found.setdefault(name, False)
        found.setdefault(family, False)
    for name in rows["cpu_routes"] + rows["localities"] + rows["vendors"]:
        found.setdefault(name, False)
    for name, *_ in rows["algorithms"] + rows["gpu_routes"]:
        found.setdefault(name, False)
    for spellings in rows["gpu_forces"]:
        for name in spellings:
            found.setdefault(name, False)
    return found


CPP_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
CPP_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def cpp_literals(text: str):
    """(line, literal) of the C++ string literals outside comments, adjacent literals joined as
    the compiler joins them (a comment marker inside a literal is rare enough here that the cut
    is not worth a real lexer)."""
    code = CPP_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    start, value, end = None, "", -1
    for match in CPP_STRING.finditer(code):
        if start is not None and code[end : match.start()].strip() == "":
            value += match.group(1)
        else:
            if start is not None:
                yield code.count("\n", 0, start) + 1, value
            start, value = match.start(), match.group(1)
        end = match.end()
    if start is not None:
        yield code.count("\n", 0, start) + 1, value


def python_literals(text: str):
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.STRING or re.match(r"^[A-Za-z]*[fFbB]", token.string):
            continue
        value = ast.literal_eval(token.string)
        if isinstance(value, str):
            yield token.start[0], value


def source_files():
    for top in ("csrc", "python/xccl"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                path = os.path.relpath(os.path.join(folder, name), ROOT)
                if path.endswith((".h", ".cc", ".cu", ".cuh", ".py")):
                    yield path


def spellings():
    """(file:line, name) of every vocabulary name spelled outside the table."""
    vocabulary_names = names()
    found = []
    for path in source_files():
        if path in TABLE:
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        literals = python_literals(text) if path.endswith(".py") else cpp_literals(text)
        plan_file = path.startswith(PLAN_FILES)
        for line, literal in literals:
            if literal not in vocabulary_names or (path, literal) in ALLOWED:
                continue
            shared = vocabulary_names[literal] or literal in OTHER_MEANINGS
            if shared and not plan_file:
                continue
            found.append(f"{path}:{line}: {literal!r}")
    return found


def test_no_name_is_spelled_elsewhere():
    found = spellings()
    assert not found, (
        "plan vocabulary names spelled outside csrc/common/vocabulary.h (derive them from the "
        "table: C++ vocab::name()/rows, Python xccl.vocabulary):\n" + "\n".join(found)
    )


def test_the_rule_sees_a_spelling(tmp_path):
    """The scanner finds names in code and ignores them in comments and prose."""
    cpp = 'x = "one_shot"; // "two_shot"\n/* "ring" */ y = "a ring"; z = "hier"\n "archical";\n'
    assert [v for _, v in cpp_literals(cpp)] == ["one_shot", "a ring", "hierarchical"]
    py = 'x = "direct"  # "ring"\ny = f"{a}"\nz = "per_host" if a else "chunk"\n'
    assert [v for _, v in python_literals(py)] == ["direct", "per_host", "chunk"]


def test_python_tables_are_the_native_ones():
    rows = _native.vocabulary()
    assert tuning_schema.CPU_COLLECTIVES == tuple(r[0] for r in rows["collectives"])
    assert tuning_schema.CPU_ROUTES == rows["cpu_routes"]
    assert tuning_schema.LOCALITIES == rows["localities"] == candidates.LOCALITIES
    # What the files held before they derived them (the names and their order are output: the
    # schema's error messages list them).
    assert tuning_schema.CPU_ROUTES == ("tcp", "shm", "hierarchical")
    assert tuning_schema.CPU_ALGORITHMS == ("direct", "ring", "one_shot", "two_shot", "shm")
    assert tuning_schema.GPU_COLLECTIVES == (
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "all_to_all",
    )
    assert tuning_schema.GPU_ROUTES == ("kernel", "vendor")
    assert tuning_schema.GPU_KERNELS == ("one_shot", "two_shot", "all_pairs", "broadcast", "none")
    assert candidates.RING_OPS == (
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "reduce",
    )
    assert candidates.SHM_REDUCTIONS == ("all_reduce", "reduce")
    assert candidates.WHOLE_RANGE_OPS == ("all_to_all",)
    assert candidates.CPU_OPS == (*candidates.DEFAULT_OPS, "reduce")
    assert candidates.GPU_KERNELS == {
        "all_reduce": ("one_shot", "two_shot"),
        "all_gather": ("all_pairs",),
        "reduce_scatter": ("all_pairs",),
        "all_to_all": ("all_pairs",),
        "broadcast": ("broadcast",),
    }
    assert vocabulary.FORCEABLE_ALGORITHMS == ("auto", "direct", "ring", "shm")
    assert [f[0] for f in vocabulary.GPU_FORCES] == [
        "auto",
        "nccl",
        "kernel",
        "one_shot",
        "two_shot",
        "all_pairs",
    ]


def test_parser_and_python_agree_on_legal_triples():
    """Which (collective, route, algorithm) a tuning table may name is decided once: the C++
    parser accepts exactly the triples vocabulary.cpu_legal does."""
    _C = pytest.importorskip("xccl._C")
    accepted = set()
    for collective in vocabulary.CPU_COLLECTIVES:
        for route in vocabulary.CPU_ROUTES:
            for algorithm in vocabulary.CPU_ALGORITHMS:
                text = (
                    "xccl-tuning 1\nworld 4 1 one_host\n"
                    f"cpu {collective} 0 inf {route} {algorithm} 0 0 0\n"
                )
                try:
                    _C._plan_rows("cpu", 4, 1, [1024], None, False, tuning=text)
                except ValueError as e:
                    assert "cannot run" in str(e), e
                    continue
                accepted.add((collective, route, algorithm))
    assert accepted == vocabulary.CPU_LEGAL
    # Spot checks of the rule itself (vocabulary.h, cpuLegal).
    assert ("all_reduce", "tcp", "ring") in accepted
    assert ("all_to_all", "tcp", "ring") not in accepted
    assert ("reduce", "shm", "two_shot") in accepted and ("reduce", "shm", "shm") not in accepted
    assert ("broadcast", "shm", "shm") in accepted
    assert ("reduce_scatter", "hierarchical", "one_shot") in accepted
    assert ("all_gather", "hierarchical", "one_shot") not in accepted
