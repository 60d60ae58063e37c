"""The engines that move bytes themselves (csrc/net/transport/tcp, ofi, shm_rings) share one tag
layout and one control protocol, declared at the net level: the tag's fields on the wire, their
encoding and their check in csrc/net/transport/wire_tag.h (WireTag), the control kinds, their
fields and their check in csrc/net/transport/control.h (ControlKind, WireControl), their handling
in TransportBase::onControl. An
engine that spelled either again would drift from the others (one refusing an unknown tag space,
another not; an abort's text worded twice).

The rules, over the engines' C++ sources with comments and string literals blanked:
- every engine's header (tcp/wire.h, ofi/wire.h, shm_rings/link.h) embeds a WireTag and a
  WireControl;
- the control kinds' names (kAbort, kStatusQuery, kStatusReply) are declared only in
  net/transport/control.h (anywhere in csrc/), and an engine names them only as `ControlKind::kX`;
- an engine declares no field or variable of type TagSpace, nor an integer one named like a tag
  field (`space`, `step`, `op`, `tagSeq`), writes no field of a WireTag (`tag.seq = ...`; only
  WireTag::encode does), no field named `space` or `tagSeq`, copies no field of a MessageTag
  into something (`x = tag.step;`), and builds no tag from fields (a brace list naming two of
  `.space`, `.step`, `.seq`, `.op`: only WireTag::decode does);
- an engine casts nothing to TagSpace or ControlKind (a value off the wire is checked, not cast).
"""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")
ENGINES = ("tcp", "ofi", "shm_rings")
CONTROL_HEADER = os.path.join("net", "transport", "control.h")
ENGINE_ROOT = os.path.join(CSRC, "net", "transport")  # an engine: a folder below it
CPP_SUFFIXES = (".h", ".cc", ".cu", ".cuh", ".inc")

CONTROL_NAME = r"\bk(?:Abort|StatusQuery|StatusReply)\b"
TAG_FIELD = r"(?:space|step|op|seq)"
RULES = {
    "a control kind named outside ControlKind::": re.compile(r"(?<!ControlKind::)" + CONTROL_NAME),
    "a TagSpace field or variable": re.compile(r"\bTagSpace\s+[A-Za-z_]\w*\s*[=;{,)]"),
    "an integer named like a tag field": re.compile(
        r"\b(?:u?int(?:8|16|32|64)_t|unsigned|int)\s+(?:space|step|op|tagSeq)\s*[=;{,)]"
    ),
    "a WireTag field written": re.compile(rf"\btag\s*\.\s*(?:{TAG_FIELD}|reserved)\s*=(?!=)"),
    "a field named space or tagSeq written": re.compile(r"\.\s*(?:space|tagSeq)\s*=(?!=)"),
    "a MessageTag field copied": re.compile(
        rf"=\s*(?:[A-Za-z_][\w.>()-]*)?\btag(?:\(\))?\s*\.\s*{TAG_FIELD}\s*;"
    ),
    "a tag built from fields": re.compile(
        rf"\{{[^{{}};]*\.\s*{TAG_FIELD}\b[^{{}};]*\.\s*{TAG_FIELD}\b[^{{}};]*\}}"
    ),
    "a cast to TagSpace or ControlKind": re.compile(
        r"static_cast<\s*(?:[\w:]*::)?(?:TagSpace|ControlKind)\s*>"
    ),
}
# Declaring a control kind (`kStatusQuery = 2`) anywhere in csrc/ but net/control.h.
DECLARED = re.compile(CONTROL_NAME + r"\s*=(?!=)")


def _code(text: str) -> str:
    """`text` with C++ comments and string/char literals replaced by spaces (lines kept)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    pattern = r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    return re.sub(pattern, blank, text, flags=re.S)


def _found(code: str) -> list[tuple[int, str]]:
    """(line, rule) of each place engine source `code` spells the tag or the control kinds."""
    hits = []
    for name, rule in RULES.items():
        for m in rule.finditer(code):
            hits.append((code.count("\n", 0, m.start()) + 1, name))
    return sorted(hits)


def _sources(folder: str):
    for here, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in sorted(names):
            if name.endswith(CPP_SUFFIXES):
                path = os.path.join(here, name)
                yield path, _code(open(path, encoding="utf-8").read())


def test_the_rules_find_the_old_spellings():
    """Each way the engines spelled the tag and the control kinds before is found; what they do
    now is not."""
    old = _code(
        "enum class FrameType : uint8_t { kData = 1, kAbort = 3, kStatusQuery = 4 };\n"
        "struct FrameHeader {\n  uint16_t space = 0;  // TagSpace\n  uint32_t step = 0;\n"
        "  uint64_t tagSeq = 0;\n};\n"
        "struct Header { TagSpace space = TagSpace::kCollective; uint32_t op = 0; };\n"
        "header.space = static_cast<uint16_t>(tag.space);\n"
        "header.step = tag.step;\n"
        "return {static_cast<TagSpace>(header.space), header.step, header.tagSeq, header.op};\n"
        "const MessageTag tag{header.space, header.step, header.seq, header.op};\n"
        "case Kind::kStatusReply: status_.reply(source, header.seq, text); return;\n"
        "header.tag.seq = signal;\n"
    )
    assert [line for line, _ in _found(old)] == [1, 1, 3, 4, 5, 7, 7, 8, 9, 10, 10, 11, 12, 13]
    now = _code(
        "enum class FrameType : uint8_t { kData = 1, kControl = 3 };\n"
        "struct FrameHeader { WireTag tag; WireControl control; uint64_t seq = 0; };\n"
        "header.tag = WireTag::encode(tag);\n"
        "const MessageTag tag = header.tag.decode();\n"
        "header.control = WireControl::make(ControlKind::kStatusQuery, round);\n"
        "const Error* refusal = health_.refusalLocked(peer, tag.space);\n"
        "signals_.arrivedLocked(peer, header.tag.seq);\n"
        "header.tag = WireTag::encode({TagSpace::kPointToPoint, 0, message.id, 0});\n"
        "message.step = AuthStep::kNonce;  // kAbort in a comment\n"
        'XCCL_WARN("ofi", "kStatusQuery in a string");\n'
        "const FrameReader::Space space = link.reader.next();\n"
    )
    assert _found(now) == []


def test_engines_spell_neither_the_tag_nor_the_control_kinds():
    found = []
    for engine in ENGINES:
        folder = os.path.join(ENGINE_ROOT, engine)
        assert os.path.isdir(folder), folder  # a moved engine must not pass unread
        for path, code in _sources(folder):
            rel = os.path.relpath(path, ROOT)
            found += [f"{rel}:{line}: {rule}" for line, rule in _found(code)]
    assert not found, (
        "engines spell the tag or the control protocol themselves (use net/transport/wire_tag.h's "
        "WireTag, net/transport/control.h's ControlKind and WireControl, "
        "TransportBase::onControl):\n" + "\n".join(found)
    )


def test_every_engine_header_embeds_the_shared_fields():
    headers = {"tcp": "wire.h", "ofi": "wire.h", "shm_rings": "link.h"}
    assert sorted(headers) == sorted(ENGINES)
    for engine, name in headers.items():
        code = _code(open(os.path.join(ENGINE_ROOT, engine, name), encoding="utf-8").read())
        for field in (r"\bWireTag\s+tag\s*;", r"\bWireControl\s+control\s*;"):
            assert re.search(field, code), f"net/transport/{engine}/{name} lacks {field}"


def test_the_control_kinds_are_declared_once():
    declared = []
    for path, code in _sources(CSRC):
        for m in DECLARED.finditer(code):
            declared.append(
                f"{os.path.relpath(path, CSRC)}:{code.count(chr(10), 0, m.start()) + 1}"
            )
    assert declared and all(d.startswith(CONTROL_HEADER + ":") for d in declared), declared
    assert len(declared) == 3, declared  # abort, status query, status reply
