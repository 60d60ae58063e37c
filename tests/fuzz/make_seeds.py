"""Writes seed inputs for a fuzz target into its corpus folder (scripts/fuzz.sh calls it).

Random bytes rarely carry a valid frame magic and a consistent header, so the fuzzer starts
from well-formed frames of every type (csrc/net/tcp/wire.h) and mutates them from there.
An input's first byte says how the rest is cut into reads (tests/fuzz/fuzz_tcp_frames.cc).
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


# tests/fuzz/fuzz_tcp_receive.cc reads operations; these spell its byte format.
HEADER_ARRIVES, HEADER_ONLY, PAYLOAD, LINK_FAILS, POST, ACK = range(6)


def op(kind, link=0):
    return bytes([kind + 6 * link])


def chunk(delta, seq, total, offset, length, *, write=False, link=0, arrive=True):
    """A chunk of message nextKnown + delta - 2 with sequence number received + seq."""
    kind = 0 if write else 2
    body = [kind, delta, seq, 1, total, offset // 8, 1, length - 8, 0]
    if write:
        body += [1, 0]  # the registered key, target 0
    return op(HEADER_ARRIVES if arrive else HEADER_ONLY, link) + bytes(body)


def post(total, tag=0):
    return op(POST) + bytes([1, total, tag])


def receive_seeds():
    two = chunk(2, 0, 16, 0, 8) + chunk(1, 0, 16, 8, 8)  # one message, in two chunks
    return {
        "in_order": post(16) + two,
        "unexpected": two + post(16),
        "stash": chunk(3, 1, 16, 0, 16, link=1) + chunk(2, 0, 16, 0, 16),
        "link_fails": chunk(2, 0, 16, 0, 16, arrive=False)
        + op(LINK_FAILS)
        + chunk(2, 0, 16, 0, 16, link=2),
        "replay": chunk(2, 0, 16, 0, 16, arrive=False) + chunk(2, 0, 16, 0, 16, link=1),
        "write": chunk(2, 0, 32, 0, 16, write=True) + chunk(1, 0, 32, 16, 16, write=True),
        "acks": op(ACK) + bytes([5]) + op(ACK) + bytes([9]),
    }


def main():
    target, folder = sys.argv[1], pathlib.Path(sys.argv[2])
    if target == "fuzz_tcp_receive":
        folder.mkdir(parents=True, exist_ok=True)
        for name, body in receive_seeds().items():
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
