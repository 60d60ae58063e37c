"""Environment defaults at import and in docs: the package applies them before torch loads
(reading the machine through the torch-free xccl._native), docs/environment.md lists each
platform's defaults and every XCCL_* variable, and `python -m xccl env` explains them."""

import json
import os
import re
import subprocess
import sys
import time

import pytest
from xccl_modules import load

env = load("env")
Facts = env.Facts


def _private_environ(monkeypatch):
    """os.environ replaced by a copy for one test, so what apply_defaults sets cannot leak."""
    monkeypatch.setattr(os, "environ", dict(os.environ))
    for name in [r.name for r in env.RULES] + ["XCCL_NO_ENV_DEFAULTS"]:
        os.environ.pop(name, None)


# ---------------------------------------------------------------------------------------------
# At import, before torch

# Code run by fresh_python() starts with this: the source tree's modules through xccl_modules.
FROM_SOURCE = (
    f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
    "from xccl_modules import load; "
)


def fresh_python(code: str, timeout: float = 60, environ=None) -> list:
    """The words `code` prints, run in a new interpreter (nothing imported yet)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environ,
        check=True,
    ).stdout.split()


def test_this_host_is_detected_quickly_and_without_torch():
    """On import of xccl this runs before torch: it must not import torch and must be cheap."""
    out = fresh_python(
        FROM_SOURCE + "import time; env = load('env'); t = time.perf_counter(); "
        "report = env.decide_defaults({}); print(report.platform, "
        "round(time.perf_counter() - t, 3), 'torch' in sys.modules)"
    )
    platform, seconds, torch_loaded = out[0], float(out[1]), out[2]
    assert platform in env.PLATFORMS
    assert torch_loaded == "False"
    assert seconds < 5.0  # ~15 ms in practice; generous for a loaded 2-core CI host


def test_native_module_loads_without_torch():
    """xccl._native links no torch library: imported alone (as xccl/__init__.py imports it,
    before torch) it loads neither the torch module nor libtorch/libc10."""
    out = fresh_python(
        FROM_SOURCE + "native = load('_native'); topo = load('topo'); "
        "data = topo.load(native.discover()); "
        "maps = open('/proc/self/maps').read(); "
        "print('torch' in sys.modules, 'libtorch' in maps or 'libc10' in maps, "
        "data['format'])"
    )
    assert out == ["False", "False", "xccl-topology"]


def test_package_import_reads_the_machine_before_torch():
    """`import xccl` applies the defaults (which read xccl._native) before it imports torch."""
    pytest.importorskip("xccl._C")
    code = (
        "import sys\n"
        "order = []\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        order.append(name)\n"
        "sys.meta_path.insert(0, Spy())\n"
        "import xccl\n"
        "print(order.index('xccl._native') < order.index('torch'))\n"
    )
    out = fresh_python(code, timeout=300)
    assert out == ["True"]


def test_import_of_the_package_applies_defaults():
    """The installed package applies the defaults at import (needs the built extension)."""
    pytest.importorskip("xccl._C")
    code = (
        "import os, xccl, xccl.env as e; r = e.last_report(); "
        "print(r is not None and r.applied, os.environ.get('NCCL_DEBUG'))"
    )
    environ = {
        k: v for k, v in os.environ.items() if k not in ("NCCL_DEBUG", "XCCL_NO_ENV_DEFAULTS")
    }
    start = time.monotonic()
    out = fresh_python(code, timeout=300, environ=environ)
    assert out[0] == "True", out
    platform = env.detect_platform(env.detect_facts())
    assert out[1] == ("WARN" if platform in env.GPU_PLATFORMS else "None")
    disabled = dict(environ, XCCL_NO_ENV_DEFAULTS="1")
    out = fresh_python(code, timeout=300, environ=disabled)
    assert out[1] == "None"
    assert time.monotonic() - start < 300


# ---------------------------------------------------------------------------------------------
# docs/environment.md says what the code does.

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _doc_sections():
    with open(os.path.join(REPO, "docs", "environment.md"), encoding="utf-8") as f:
        text = f.read()
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith("#"):
            current = line.lstrip("#").strip()
            sections[current] = []
        elif current and line.startswith("| `"):
            sections[current].append(line.split("|")[1].strip())
    return sections


def _names(cells):
    """The first backticked name of each first-column cell."""
    return [cell.split("`")[1] for cell in cells]


def test_docs_list_each_platforms_defaults():
    sections = _doc_sections()
    for platform in env.PLATFORMS:
        documented = _names(sections[platform])
        expected = [rule.name for rule in env.RULES if platform in rule.platforms]
        assert sorted(documented) == sorted(expected), platform
    reasons = sections["Why, and where each default comes from"]
    for rule in env.RULES:
        assert any(rule.name in row for row in reasons), rule.name


def _registered():
    with open(os.path.join(REPO, "csrc", "common", "env.cc"), encoding="utf-8") as f:
        # Each table entry starts a line: text("XCCL_...", integer("XCCL_...", ...
        return re.findall(r'^\s*[a-z]+\("(XCCL_[A-Z0-9_]+)"', f.read(), re.M)


# os.environ.get("X"), os.getenv("X"), environ["X"], environ.get('X', ...)
_READ = re.compile(r"""(?:environ(?:\.get)?|getenv|\.get)\s*[\[(]\s*['"](XCCL_[A-Z0-9_]+)['"]""")
# A variable named through a constant (NO_DEFAULTS_VAR = "XCCL_...") and read by that name,
# possibly in another module (environ.get(_env.NO_DEFAULTS_VAR, "")).
_CONSTANT = re.compile(r"""^\s*([A-Z_]+)\s*=\s*['"](XCCL_[A-Z0-9_]+)['"]""", re.M)


def python_reads():
    """Every XCCL_* variable the Python reads (python/, setup.py): {name: [files]}."""
    root = os.path.join(REPO, "python", "xccl")
    texts = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    texts[os.path.relpath(os.path.join(folder, name), root)] = f.read()
    for outside in ("setup.py", os.path.join("python", "xccl_autoload.py")):
        with open(os.path.join(REPO, outside), encoding="utf-8") as f:
            texts[os.path.relpath(os.path.join(REPO, outside), root)] = f.read()
    constants = {c: v for text in texts.values() for c, v in _CONSTANT.findall(text)}
    found = {}
    # Also every literal that is exactly a name: reads through a loop over names, e.g.
    # `for var in ("XCCL_SOCKET_IFNAME", ...): environ[var]`, which the patterns cannot follow.
    for path, text in texts.items():
        for _, variable in re.findall(r"""(['"])(XCCL_[A-Z0-9_]+)\1""", text):
            found.setdefault(variable, []).append(path)
    for path, text in texts.items():
        names = set(_READ.findall(text))
        for constant, variable in constants.items():
            if re.search(rf"(?:environ|getenv|\.get)\s*[\[(]\s*(?:\w+\.)?{constant}\b", text):
                names.add(variable)
        for variable in names:
            found.setdefault(variable, []).append(path)
    return {variable: sorted(set(paths)) for variable, paths in found.items()}


def script_reads():
    """Every XCCL_* variable the shell scripts expand (${XCCL_X...} or $XCCL_X): {name: [files]}."""
    found = {}
    for folder in ("scripts", "benchmarks", ".ci"):
        for name in sorted(os.listdir(os.path.join(REPO, folder))):
            path = os.path.join(REPO, folder, name)
            if not os.path.isfile(path) or not (name.endswith(".sh") or folder == ".ci"):
                continue
            with open(path, encoding="utf-8") as f:
                for variable in re.findall(r"\$\{?(XCCL_[A-Z0-9_]+)", f.read()):
                    found.setdefault(variable, []).append(os.path.join(folder, name))
    return found


def test_python_reads_only_registered_variables():
    reads = python_reads()
    for variable, files in script_reads().items():
        reads.setdefault(variable, []).extend(files)
    # What the scan must see: one of each way Python reads a variable today.
    assert {
        "XCCL_NO_ENV_DEFAULTS",
        "XCCL_LOG_LEVEL",
        "XCCL_NO_AUTOLOAD",
        "XCCL_SOCKET_IFNAME",
        "XCCL_CUDA_ARCHS",  # setup.py
        "XCCL_CHECK_BUDGET_S",  # benchmarks/device_check.sh
    } <= set(reads)
    native = load("_native")
    registered = {name for name, _, _ in native.env_variables()}
    assert registered == set(_registered())
    documented = set(_names(_doc_sections()["XCCL variables"]))
    missing = {v: files for v, files in reads.items() if v not in registered}
    assert not missing, f"read in Python but not in csrc/common/env.cc's table: {missing}"
    undocumented = {v: files for v, files in reads.items() if v not in documented}
    assert not undocumented, f"read in Python but not in docs/environment.md: {undocumented}"


def test_python_reads_registered_booleans_as_the_registry_does():
    """XCCL_DISABLE_ALIAS is a boolean in csrc/common/env.cc: any of its true spellings keeps
    xccl from registering the backend name, and 0 does not."""
    pytest.importorskip("xccl._C")
    code = "import xccl._registration as r; print(r.status().replace(' ', '_'))"
    assert fresh_python(code, 300, dict(os.environ, XCCL_DISABLE_ALIAS="yes")) == [
        "not_registered:_XCCL_DISABLE_ALIAS=yes"
    ]
    kept = fresh_python(code, 300, dict(os.environ, XCCL_DISABLE_ALIAS="0"))
    assert "XCCL_DISABLE_ALIAS" not in kept[0]  # registered, unless torch has its own xccl


def test_docs_list_every_xccl_variable():
    declared = _registered()
    assert "XCCL_TOPO_FILE" in declared and "XCCL_TOPO_DUMP_FILE" in declared
    assert set(declared) <= set(_names(_doc_sections()["XCCL variables"]))


# ---------------------------------------------------------------------------------------------
# python -m xccl env


def test_env_command_previews_and_explains(monkeypatch, capsys):
    cli = load("cli")
    monkeypatch.setattr(env.decisions, "_last_report", None)
    _private_environ(monkeypatch)
    os.environ["NCCL_DEBUG"] = "INFO"
    assert cli.main(["env", "--platform", "amd_mi300x", "--all"]) == 0
    out = capsys.readouterr().out
    assert "platform: amd_mi300x" in out and "(a preview: nothing was changed)" in out
    assert "Would set:\n" in out and "\n  HIP_FORCE_DEV_KERNARG=1  [safe]\n" in out
    assert "Left alone: set by the user:\n  NCCL_DEBUG=INFO" in out
    assert "Never set by xccl" in out
    assert "HIP_FORCE_DEV_KERNARG" not in os.environ  # a preview changes nothing
    assert cli.main(["env", "--json", "--platform", "cpu"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["platform"] == "cpu" and data["applied"] is False
    assert cli.main(["env", "--platform", "tpu"]) == 2
    assert "unknown platform 'tpu'" in capsys.readouterr().err


def test_env_command_shows_what_import_applied(monkeypatch, capsys):
    cli = load("cli")
    _private_environ(monkeypatch)
    monkeypatch.setattr(env.decisions, "_last_report", None)
    env.apply_defaults(platform=env.AMD_MI250, facts=Facts())
    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out
    assert "platform: amd_mi250" in out and "Set by xccl:\n" in out and "preview" not in out
    os.environ["XCCL_NO_ENV_DEFAULTS"] = "1"
    env.apply_defaults()
    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("XCCL_NO_ENV_DEFAULTS=1: xccl set no environment defaults.")
    assert "What xccl would set without it:" in out
