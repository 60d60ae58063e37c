"""Writes seed inputs for a fuzz target into its corpus folder (scripts/fuzz.sh calls it).

Random bytes rarely carry a valid frame magic and a consistent header, so the fuzzer starts
from well-formed frames of every type (csrc/net/tcp/wire.h) and mutates them from there.
An input's first byte says how the rest is cut into reads (tests/fuzz/fuzz_tcp_frames.cc).
fuzz_ofi_header's inputs are records instead (tests/fuzz/fuzz_ofi_header.cc): well-formed
headers in and out of stream order, floods past the caps, and remote CQ data.
"""

import pathlib
import struct
import sys

MAGIC = 0x58434C34  # kFrameMagic
DATA, ACK, ABORT, STATUS_QUERY, STATUS_REPLY, BYE, WRITE, WRITE_ACK = range(1, 9)


def frame(
    kind, payload=b"", *, message=0, offset=0, total=None, seq=0, ack=0, tag_seq=0, key=0, target=0
):
    total = len(payload) if total is None else total
    header = struct.pack(
        "<IBBHIIII8Q",
        MAGIC,
        kind,
        0,
        2,
        0,
        0,
        len(payload),
        0,
        tag_seq,
        message,
        offset,
        total,
        seq,
        ack,
        key,
        target,
    )
    assert len(header) == 88  # sizeof(FrameHeader)
    return header + payload


def frame_seeds():
    write = frame(
        WRITE, b"abcdefgh", message=1, total=16, seq=1, tag_seq=7, key=0x1234, target=4096
    )
    write_tail = frame(
        WRITE, b"ijklmnop", message=1, offset=8, total=16, seq=2, tag_seq=7, key=0x1234, target=4096
    )
    return {
        "data": frame(DATA, b"hello", message=0, seq=0),
        "write": write + write_tail,
        "write_ack": frame(WRITE_ACK, b"", message=2, seq=3, tag_seq=1, ack=3),
        "write_refused": frame(
            WRITE_ACK, b"refused: no registration has that key", message=3, seq=4, tag_seq=1
        ),
        "control": frame(ACK, ack=5) + frame(STATUS_REPLY, b"at 0", tag_seq=1) + frame(BYE),
    }


OFI_MAGIC = 0x58434F31  # net/ofi/wire.h kMagic
OFI_SESSION = 0x5345535349304E31  # the fuzzer's group session (fuzz_ofi_header.cc)
RAW, CRAFTED, BURST, SIGNAL = range(4)  # fuzz_ofi_header.cc's record ops


def ofi_header(kind=1, space=2, source=1, inline=b"", stream=0, size=None, data_id=0):
    size = len(inline) if size is None else size
    header = struct.pack(
        "<IHHIIiIQQQQQ",
        OFI_MAGIC,
        kind,
        space,
        0,
        0,
        source,
        len(inline),
        7,
        size,
        stream,
        data_id,
        OFI_SESSION,
    )
    assert len(header) == 64  # sizeof(Header)
    return header + inline


def crafted(source=1, kind=0, inline=16, delta=0, mode=1, size=None):
    """One crafted header record: fields in the order fuzz_ofi_header.cc's craft() takes them."""
    record = bytes([CRAFTED, source, 1, kind, 2]) + struct.pack("<H", 7) + bytes([mode])
    if mode & 0xC0 != 0xC0:
        record += struct.pack("<H", inline)
    if size is not None:  # mode & 2 without mode & 1: the announced size
        record += struct.pack("<Q", size)
    return record + bytes([delta & 0xFF, 1])


def burst(source=1, count=4200, ahead=1, inline=0, mode=1):
    record = bytes([BURST, source, 1, 0, 2]) + struct.pack("<H", 7) + bytes([mode])
    if mode & 0xC0 != 0xC0:
        record += struct.pack("<H", inline)
    return record + struct.pack("<H", count) + bytes([ahead])


def signal(cq_bytes, ranks, data):
    return bytes([SIGNAL, cq_bytes]) + struct.pack("<IBQ", ranks, 1, data)


def ofi_seeds():
    group = bytes([2, 0])  # 3 ranks, this one rank 0
    raw = ofi_header(inline=b"hello", stream=0)
    return {
        "in_order": group + crafted(delta=0) + crafted(delta=0) + crafted(source=2, delta=0),
        "reordered": group + crafted(delta=2) + crafted(delta=1) + crafted(delta=0),
        "control": group + crafted(kind=1) + crafted(kind=2, inline=0) + crafted(kind=3),
        "flood": group + burst(),
        "flood_eager": group + burst(count=1100, mode=0xC1),
        "large": group + crafted(mode=2, inline=0, size=1 << 40),
        "raw": group + bytes([RAW]) + struct.pack("<H", len(raw)) + raw,
        "signals": group
        + signal(8, 2, (1 << 48) | 5)
        + signal(8, 2, (5 << 48) | 5)
        + signal(4, 2, (1 << 16) | 9),
    }


def main():
    target, folder = sys.argv[1], pathlib.Path(sys.argv[2])
    if target == "fuzz_ofi_header":  # records, not reads: no cutting
        folder.mkdir(parents=True, exist_ok=True)
        for name, body in ofi_seeds().items():
            (folder / f"seed-{name}").write_bytes(body)
        return
    seeds = {"fuzz_tcp_frames": frame_seeds}.get(target)
    if seeds is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in seeds().items():
        for step in (1, 13, 96):  # one byte, odd cuts, most of a header per read
            (folder / f"seed-{name}-{step}").write_bytes(bytes([step - 1]) + body)


if __name__ == "__main__":
    main()
