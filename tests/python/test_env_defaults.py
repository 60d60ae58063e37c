"""Environment defaults (python/xccl/env/): for every default in the table, applied on its
platform when its condition holds, never on another platform, never over a user's (or a config
file's) value; the report of what was applied. Detection is in test_env_defaults_facts.py, the
docs, the registry and `python -m xccl env` in test_env_defaults_docs.py.

These tests never import torch: xccl.env runs before torch is imported.
"""

import json
import os

import pytest
from xccl_modules import load

env = load("env")
Facts = env.Facts

# Facts that make each "detected" rule's condition true, and the value it must then produce.
SATISFY = {
    "NCCL_IB_TIMEOUT": {"nodes": 2, "local_ranks": 8, "rdma": frozenset({"infiniband"})},
    "NCCL_SOCKET_IFNAME": {
        "nodes": 2,
        "egress_interface": "ens7",
        "candidate_interfaces": ("docker0", "ens7", "eno1"),
    },
    "GLOO_SOCKET_IFNAME": {
        "nodes": 2,
        "egress_interface": "ens7",
        "candidate_interfaces": ("docker0", "ens7", "eno1"),
    },
    "NCCL_TOPO_FILE": {"virtual_machine": True, "provider_topo_files": ("/etc/nccl/h100-vm.xml",)},
    "TORCH_BLAS_PREFER_HIPBLASLT": {"hipblaslt_gfx90a": True},
    "HSA_NO_SCRATCH_RECLAIM": {"mec_firmware": 170},
    "NCCL_MIN_NCHANNELS": {"nodes": 1, "gpu_count": 8, "local_ranks": 8},
    "HSA_FORCE_FINE_GRAIN_PCIE": {"gpu_count": 2, "xgmi": False, "large_bar": True},
    "OMP_NUM_THREADS": {"local_ranks": 8, "cpus": 64},
}
EXPECTED_VALUE = {
    "NCCL_SOCKET_IFNAME": "=ens7",
    "GLOO_SOCKET_IFNAME": "ens7",
    "NCCL_TOPO_FILE": "/etc/nccl/h100-vm.xml",
    "OMP_NUM_THREADS": "8",
}


def satisfying(rule) -> Facts:
    return Facts(**SATISFY.get(rule.name, {}))


def rule_id(rule) -> str:
    return f"{rule.name}@{'+'.join(rule.platforms) if len(rule.platforms) < 3 else 'many'}"


def platforms_of(name):
    """Every platform on which some rule sets `name`."""
    return {p for rule in env.RULES if rule.name == name for p in rule.platforms}


# ---------------------------------------------------------------------------------------------
# Every default: applied only on its platform, never over a user or config value.


def test_every_detected_rule_has_a_satisfying_case():
    detected = {rule.name for rule in env.RULES if rule.kind == "detected"}
    assert detected <= set(SATISFY), detected - set(SATISFY)
    assert {rule.kind for rule in env.RULES} == {"safe", "detected"}


@pytest.mark.parametrize("rule", env.RULES, ids=rule_id)
def test_applied_on_its_platforms(rule):
    for platform in rule.platforms:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=satisfying(rule))
        fixed = rule.value if isinstance(rule.value, str) else None
        expected = EXPECTED_VALUE.get(rule.name, fixed)
        assert environ.get(rule.name) == expected, (platform, decisions)
        mine = [d for d in decisions if d.name == rule.name]
        assert [d.action for d in mine] == ["set"]
        assert mine[0].reason and mine[0].source


@pytest.mark.parametrize("rule", env.RULES, ids=rule_id)
def test_never_applied_on_other_platforms(rule):
    others = set(env.PLATFORMS) - platforms_of(rule.name)
    assert others, "a rule for every platform is not a platform default"
    for platform in others:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=satisfying(rule))
        assert rule.name not in environ, platform
        assert rule.name not in [d.name for d in decisions]


@pytest.mark.parametrize("rule", env.RULES, ids=rule_id)
def test_never_overrides_a_user_value(rule):
    for platform in rule.platforms:
        for user_value in ("user-choice", ""):
            environ = {rule.name: user_value}
            decisions = env.apply_defaults(environ, platform=platform, facts=satisfying(rule))
            assert environ[rule.name] == user_value
            mine = [d for d in decisions if d.name == rule.name]
            assert [(d.action, d.user_value) for d in mine] == [("user", user_value)]


@pytest.mark.parametrize("rule", env.RULES, ids=rule_id)
def test_never_overrides_an_nccl_config_file(rule):
    facts = Facts(**{**SATISFY.get(rule.name, {}), "config_file_vars": frozenset({rule.name})})
    for platform in rule.platforms:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=facts)
        assert rule.name not in environ
        assert [d.action for d in decisions if d.name == rule.name] == ["config"]


@pytest.mark.parametrize("rule", [r for r in env.RULES if r.kind == "detected"], ids=rule_id)
def test_detected_rules_need_their_condition(rule):
    for platform in rule.platforms:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=Facts())
        assert rule.name not in environ
        mine = [d for d in decisions if d.name == rule.name]
        assert [d.action for d in mine] == ["condition"]
        assert mine[0].condition


@pytest.mark.parametrize("rule", [r for r in env.RULES if r.at_runtime_start], ids=rule_id)
def test_runtime_variables_are_not_set_after_the_runtime_started(rule):
    facts = Facts(
        **{**SATISFY.get(rule.name, {}), "gpu_runtime_started": True, "torch_imported": True}
    )
    for platform in rule.platforms:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=facts)
        assert rule.name not in environ
        assert [d.action for d in decisions if d.name == rule.name] == ["late"]


def test_no_env_defaults_switch_disables_everything():
    environ = {"XCCL_NO_ENV_DEFAULTS": "1"}
    assert (
        env.apply_defaults(
            environ, platform=env.AMD_MI300X, facts=Facts(**SATISFY["NCCL_MIN_NCHANNELS"])
        )
        == []
    )
    assert environ == {"XCCL_NO_ENV_DEFAULTS": "1"}
    environ = {"XCCL_NO_ENV_DEFAULTS": "0"}
    assert env.apply_defaults(environ, platform=env.AMD_MI300X, facts=Facts())
    assert environ["HIP_FORCE_DEV_KERNARG"] == "1"


def test_cpu_only_hosts_get_no_gpu_library_variables():
    merged = {k: v for case in SATISFY.values() for k, v in case.items()}
    facts = Facts(**{**merged, "nodes": 2})
    environ = {}
    env.apply_defaults(environ, platform=env.CPU, facts=facts)
    prefixes = ("NCCL_", "RCCL_", "HSA_", "HIP_", "CUDA_", "TORCH_NCCL_", "TORCH_BLAS_")
    assert not [name for name in environ if name.startswith(prefixes)], environ
    assert environ == {"GLOO_SOCKET_IFNAME": "ens7", "OMP_NUM_THREADS": "8"}


def test_other_gpus_get_no_defaults():
    environ = {}
    assert env.apply_defaults(environ, platform=env.OTHER_GPU, facts=Facts()) == []
    assert environ == {}


# ---------------------------------------------------------------------------------------------
# The conditions that matter most, near their edges.


@pytest.mark.parametrize(
    "overrides",
    [
        {"nodes": 2, "gpu_count": 8, "local_ranks": 8},  # multi-node: hurts (AMD 4-node uses 40)
        {"nodes": None, "gpu_count": 8, "local_ranks": 8},  # not launched: single node not proven
        {"nodes": 1, "gpu_count": 8, "local_ranks": 4},  # only half the GPUs take part
        {"nodes": 1, "gpu_count": 4, "local_ranks": 4},  # a 4-GPU box
    ],
)
def test_min_nchannels_only_for_a_whole_single_mi300x_node(overrides):
    environ = {}
    env.apply_defaults(environ, platform=env.AMD_MI300X, facts=Facts(**overrides))
    assert "NCCL_MIN_NCHANNELS" not in environ
    # ... and never on MI250 even when the shape fits.
    env.apply_defaults(
        environ, platform=env.AMD_MI250, facts=Facts(**SATISFY["NCCL_MIN_NCHANNELS"])
    )
    assert "NCCL_MIN_NCHANNELS" not in environ


def test_interface_names_come_from_this_hosts_route():
    for egress in ("ens7", "bond0.2093"):
        facts = Facts(nodes=2, egress_interface=egress, candidate_interfaces=("eth0", egress))
        environ = {}
        env.apply_defaults(environ, platform=env.NVIDIA_MULTINODE, facts=facts)
        assert environ["NCCL_SOCKET_IFNAME"] == "=" + egress  # exact match, never a prefix
        assert environ["GLOO_SOCKET_IFNAME"] == egress
    # One interface only: NCCL's own choice is right, so nothing is set.
    environ = {}
    env.apply_defaults(
        environ,
        platform=env.NVIDIA_MULTINODE,
        facts=Facts(nodes=2, egress_interface="eth0", candidate_interfaces=("eth0",)),
    )
    assert "NCCL_SOCKET_IFNAME" not in environ and "GLOO_SOCKET_IFNAME" not in environ
    # Single node: no interface is needed.
    environ = {}
    env.apply_defaults(
        environ,
        platform=env.NVIDIA,
        facts=Facts(nodes=1, egress_interface="ens7", candidate_interfaces=("eth0", "ens7")),
    )
    assert "NCCL_SOCKET_IFNAME" not in environ


def test_ib_timeout_needs_an_rdma_fabric_and_several_nodes():
    for facts in (
        Facts(nodes=1, rdma=frozenset({"infiniband"})),
        Facts(nodes=4),
        Facts(nodes=4, rdma=frozenset({"efa"})),
    ):
        environ = {}
        env.apply_defaults(environ, platform=env.NVIDIA_MULTINODE, facts=facts)
        assert "NCCL_IB_TIMEOUT" not in environ, facts
    environ = {}
    env.apply_defaults(
        environ, platform=env.AMD_MI250, facts=Facts(nodes=2, rdma=frozenset({"roce"}))
    )
    assert environ["NCCL_IB_TIMEOUT"] == "22"


def test_topo_file_only_in_a_vm_without_nvidias_own_file():
    for overrides in (
        {"virtual_machine": False},
        {"nvidia_virtual_topology": True},
        {"provider_topo_files": ("/etc/nccl/a.xml", "/etc/nccl/b.xml")},
    ):
        facts = Facts(**{**SATISFY["NCCL_TOPO_FILE"], **overrides})
        environ = {}
        env.apply_defaults(environ, platform=env.NVIDIA, facts=facts)
        assert "NCCL_TOPO_FILE" not in environ, overrides


def test_scratch_reclaim_by_firmware_version():
    for firmware, expected in ((176, "1"), (177, None), (None, None)):
        environ = {}
        env.apply_defaults(environ, platform=env.AMD_MI300X, facts=Facts(mec_firmware=firmware))
        assert environ.get("HSA_NO_SCRATCH_RECLAIM") == expected


def _private_environ(monkeypatch):
    """os.environ replaced by a copy for one test, so what apply_defaults sets cannot leak."""
    monkeypatch.setattr(os, "environ", dict(os.environ))
    for name in [r.name for r in env.RULES] + ["XCCL_NO_ENV_DEFAULTS"]:
        os.environ.pop(name, None)


def test_apply_to_os_environ_records_a_report(monkeypatch, capsys):
    _private_environ(monkeypatch)
    monkeypatch.setattr(env.decisions, "_last_report", None)
    os.environ.update(XCCL_LOG_LEVEL="info", NCCL_DEBUG="INFO")
    decisions = env.apply_defaults(platform=env.AMD_MI250, facts=Facts())
    assert os.environ["HIP_FORCE_DEV_KERNARG"] == "1"
    assert os.environ["NCCL_DEBUG"] == "INFO"
    report = env.last_report()
    assert report.applied and report.platform == env.AMD_MI250
    assert report.decisions == decisions
    logged = capsys.readouterr().err
    assert "[xccl env] set HIP_FORCE_DEV_KERNARG=1" in logged
    assert "left NCCL_DEBUG='INFO' as the user set it" in logged


def test_report_text_and_json():
    report = env.decide_defaults(
        {"NCCL_DEBUG": "TRACE"}, platform=env.AMD_MI300X, facts=Facts(mec_firmware=200)
    )
    text = env.format_report(report, show_all=True)
    assert "platform: amd_mi300x" in text
    assert "Would set:" in text and "  RCCL_MSCCL_ENABLE=0  [safe]" in text
    assert "Left alone: set by the user:\n  NCCL_DEBUG=TRACE" in text
    assert "needs: MEC firmware version < 177" in text
    assert "NCCL_IB_GID_INDEX" in text  # the never-set list
    data = json.loads(json.dumps(env.report_to_dict(report), default=str))
    assert data["platform"] == "amd_mi300x"
    assert {d["name"] for d in data["decisions"] if d["action"] == "set"} >= {"RCCL_MSCCL_ENABLE"}
    with pytest.raises(ValueError, match="unknown platform"):
        env.decide_defaults({}, platform="tpu", facts=Facts())


def test_user_settings_that_hurt_are_flagged():
    multi = Facts(nodes=2, gpu_vendor="amd", gpu_arch="gfx942", gpu_count=8)

    def names(environ, facts):
        return [name for name, _, _ in env.check_user_settings(environ, facts)]

    assert names({"NCCL_MIN_NCHANNELS": "112"}, multi) == ["NCCL_MIN_NCHANNELS"]
    assert names({"NCCL_MIN_NCHANNELS": "112"}, Facts(nodes=1)) == []
    assert names({"NCCL_SOCKET_IFNAME": "eth0"}, multi) == ["NCCL_SOCKET_IFNAME"]
    assert names({"NCCL_SOCKET_IFNAME": "=eth0"}, multi) == []
    assert names({"NCCL_SOCKET_IFNAME": "^docker,lo"}, multi) == []
    assert names({"NCCL_IB_RETRY_CNT": "10"}, multi) == ["NCCL_IB_RETRY_CNT"]
    assert names({"NCCL_IB_RETRY_CNT": "7"}, multi) == []
    assert names(
        {"RDMAV_FORK_SAFE": "1"}, Facts(gpu_vendor="nvidia", gpu_count=8, rdma=frozenset({"efa"}))
    ) == ["RDMAV_FORK_SAFE"]
    assert names({"RDMAV_FORK_SAFE": "1"}, multi) == []
    assert names({"NCCL_NVLS_ENABLE": "0"}, Facts(nvswitch=True)) == ["NCCL_NVLS_ENABLE"]
    assert names({"NCCL_P2P_DISABLE": "1"}, Facts(xgmi=True)) == ["NCCL_P2P_DISABLE"]
    assert names({"NCCL_P2P_DISABLE": "1"}, Facts()) == []
    assert names({"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_PROTO": "Simple"}, Facts()) == [
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "NCCL_PROTO",
    ]
