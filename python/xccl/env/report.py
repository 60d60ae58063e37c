"""Report: the text and JSON of `python -m xccl env`."""

from __future__ import annotations

from .decisions import Report
from .rules import LEFT_ALONE, NO_DEFAULTS_VAR, PLATFORMS


def format_report(report: Report, show_all: bool = False) -> str:
    f = report.facts
    lines = []
    if report.disabled:
        lines.append(f"{NO_DEFAULTS_VAR}=1: xccl set no environment defaults.")
        return "\n".join(lines)
    gpu = f"{f.gpu_count}x {f.gpu_vendor} {f.gpu_arch}".rstrip() if f.gpu_count else "none"
    job = (
        "not launched by a known launcher"
        if f.nodes is None
        else (f"{f.nodes} node(s), {f.local_ranks or '?'} rank(s) on this one")
    )
    lines.append(f"platform: {report.platform} ({PLATFORMS[report.platform]})")
    lines.append(
        f"  GPUs: {gpu}; NVSwitch: {'yes' if f.nvswitch else 'no'}; "
        f"xGMI: {'yes' if f.xgmi else 'no'}; RDMA: {', '.join(sorted(f.rdma)) or 'none'}; "
        f"VM: {'yes' if f.virtual_machine else 'no'}"
    )
    lines.append(f"  job: {job}")
    if not report.applied:
        lines.append("  (a preview: nothing was changed)")
    sections = (
        ("set", "Set by xccl" if report.applied else "Would set"),
        ("user", "Left alone: set by the user"),
        ("config", "Left alone: set in an NCCL/RCCL config file"),
        ("late", "Not set: too late in this process"),
        ("condition", "Not set: condition not met on this host"),
    )
    for action, title in sections:
        chosen = report.by_action(action)
        if not chosen:
            continue
        lines.append("")
        lines.append(f"{title}:")
        for d in chosen:
            if action == "set":
                lines.append(f"  {d.name}={d.value}  [{d.kind}]")
            elif action == "user":
                lines.append(f"  {d.name}={d.user_value}  (xccl's default: {d.value})")
            else:
                lines.append(f"  {d.name}  (xccl's default: {d.value or '-'})")
            if action == "condition":
                lines.append(f"      needs: {d.condition}")
            lines.append(f"      why: {d.reason}")
            lines.append(f"      source: {d.source}")
    if not report.decisions:
        lines.append("")
        lines.append("No defaults apply to this platform.")
    if show_all:
        lines.append("")
        lines.append("Never set by xccl (dangerous as defaults):")
        for name, why, source in LEFT_ALONE:
            lines.append(f"  {name}: {why}  [{source}]")
    return "\n".join(lines)


def report_to_dict(report: Report) -> dict:
    f = report.facts
    return {
        "platform": report.platform,
        "disabled": report.disabled,
        "applied": report.applied,
        "facts": {
            k: (sorted(v) if isinstance(v, (set, frozenset)) else v) for k, v in f.__dict__.items()
        },
        "decisions": [d.__dict__ for d in report.decisions],
    }
