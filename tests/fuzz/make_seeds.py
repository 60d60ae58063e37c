"""Writes seed inputs for a fuzz target into its corpus folder (scripts/fuzz.sh calls it).

Random bytes rarely carry a valid frame magic and a consistent header, so the fuzzer starts
from well-formed frames of every type (csrc/net/transport/tcp/wire.h) and mutates them from there.
An input's first byte says how the rest is cut into reads (tests/fuzz/fuzz_tcp_frames.cc).
fuzz_ofi_header's inputs are records instead (tests/fuzz/fuzz_ofi_header.cc): well-formed
headers in and out of stream order, floods past the caps, and remote CQ data.
"""

import hashlib
import hmac
import pathlib
import struct
import sys

MAGIC = 0x58434C34  # kFrameMagic
DATA, ACK, CONTROL, BYE, WRITE, WRITE_ACK = range(1, 7)  # tcp/wire.h FrameType
ABORT, STATUS_QUERY, STATUS_REPLY = range(1, 4)  # net/transport/control.h ControlKind
POINT_TO_POINT = 2  # net/transport/transport.h TagSpace


def wire_tag(seq=0, space=POINT_TO_POINT):
    """net/transport/wire_tag.h WireTag (24 bytes): seq, step, op, space, reserved."""
    return struct.pack("<QIIH6x", seq, 0, 0, space)


def wire_control(kind=0, round_=0):
    """net/transport/control.h WireControl (16 bytes): round, kind, reserved."""
    return struct.pack("<QB7x", round_, kind)


def with_header(layout, size, fields, payload):
    """`fields` packed by `layout` into a C header of `size` bytes, then `payload`."""
    header = struct.pack(layout, *fields)
    assert len(header) == size, f"{layout} packs {len(header)} bytes, the header has {size}"
    return header + payload


def frame(
    kind,
    payload=b"",
    *,
    message=0,
    offset=0,
    total=None,
    seq=0,
    ack=0,
    tag_seq=0,
    control=0,
    round_=0,
    key=0,
    target=0,
):
    total = len(payload) if total is None else total
    # magic, type, reserved, length, reserved2; then the tag and the control fields
    head = struct.pack("<IB3xII", MAGIC, kind, len(payload), 0)
    head += wire_tag(tag_seq) + wire_control(control, round_)
    # message, offset, total, seq, ack, key, target
    longs = (message, offset, total, seq, ack, key, target)
    return with_header("<56s7Q", 112, (head,) + longs, payload)


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
        "control": frame(ACK, ack=5)
        + frame(CONTROL, control=STATUS_QUERY, round_=1)
        + frame(CONTROL, b"at 0", control=STATUS_REPLY, round_=1)
        + frame(CONTROL, b"rank 1 gave up", control=ABORT)
        + frame(BYE),
    }


SHM_MAGIC = 0x58434C51  # csrc/net/transport/shm_rings/link.h kFrameMagic
SHM_DATA, SHM_CONTROL, SHM_WRITE, SHM_WRITE_ACK = range(1, 5)


def shm_frame(kind, payload=b"", *, seq=0, control=0, bytes_=None, key=0, offset=0, ident=0):
    """A shm FrameHeader (80 bytes) and its payload."""
    size = len(payload) if bytes_ is None else bytes_
    # magic, type, refused; the tag and the control fields (round = seq); bytes, key, offset, id
    head = struct.pack("<IHH", SHM_MAGIC, kind, 0) + wire_tag(seq) + wire_control(control, seq)
    return with_header("<48s4Q", 80, (head, size, key, offset, ident), payload)


def shm_ring_seeds():
    """Scripts for tests/fuzz/fuzz_shm_ring.cc: capacity (2 bytes), start index (8), then ops."""

    def script(capacity, start, *ops):
        return struct.pack("<HQ", capacity - 16, start) + b"".join(ops)

    def peer_writes(data):  # op 4: the peer writes these stream bytes
        return bytes([4]) + struct.pack("<H", len(data)) + data

    read = bytes([6])
    frames = shm_frame(SHM_DATA, b"hello world", seq=1) + shm_frame(
        SHM_CONTROL, b"at 3", seq=4, control=STATUS_REPLY
    )
    big = shm_frame(SHM_WRITE, bytes(300), seq=2, key=7, offset=64)
    return {
        "frames": script(256, 0, peer_writes(frames), read),
        "wrapping": script(100, 2**64 - 40, peer_writes(frames), read, peer_writes(frames), read),
        "chunked": script(128, 5, peer_writes(big[:100]), read, peer_writes(big[100:]), read),
        "head_jump": script(
            64,
            0,
            peer_writes(shm_frame(SHM_DATA, bytes_=1000)),
            bytes([0]) + struct.pack("<Q", 4096),
            read,
        ),
        "tail_ahead": script(
            64, 9, bytes([1]) + struct.pack("<Q", 10), bytes([7]) + b"\x10\x00\x20\x00"
        ),
        "send": script(200, 0, bytes([7]) + b"\x00\x01\x40\x00", bytes([7]) + b"\x10\x00\xff\x00"),
    }


HELLO_MAGIC, WIRE_VERSION = 0x58434C48, 6  # kHelloMagic, kWireVersion
OFFER, CHALLENGE, PROOF = 1, 2, 3  # HelloStep
FUZZ_KEY = bytes([7]) * 32  # fuzz_tcp_handshake.cc fuzzTerms()
ACCEPTOR_NONCE, DIALER_NONCE = bytes([0xA5]) * 16, bytes([0x5A]) * 16


def group_id(prefix: bytes, token: bytes) -> bytes:
    """wire.cc groupId()."""
    label = b"xccl tcp group\0"
    return hashlib.sha256(label + struct.pack("<Q", len(prefix)) + prefix + token).digest()[:16]


FUZZ_GROUP = group_id(b"fuzz", b"token")


def hello_mac(by_acceptor, dialer, acceptor, link, dialer_nonce, acceptor_nonce):
    """wire.cc HelloExchange::mac()."""
    label = b"xccl tcp acceptor\0" if by_acceptor else b"xccl tcp dialer\0"
    text = label + struct.pack("<H", WIRE_VERSION) + FUZZ_GROUP
    text += struct.pack("<iii", dialer, acceptor, link) + dialer_nonce + acceptor_nonce
    return hmac.new(FUZZ_KEY, text, hashlib.sha256).digest()


def hello(step, rank, link, nonce=bytes(16), mac=bytes(32), group=FUZZ_GROUP):
    body = struct.pack("<IHHiB3x", HELLO_MAGIC, WIRE_VERSION, link, rank, step)
    out = body + group + nonce + mac
    assert len(out) == 80  # sizeof(Hello)
    return out


def handshake_seeds():
    """The first byte: 0 to the acceptor, 1 to the dialer (+2: made plausible)."""
    dialer, acceptor, link, nonce = 3, 1, 2, bytes(range(16))
    proof_mac = hello_mac(False, dialer, acceptor, link, nonce, ACCEPTOR_NONCE)
    offer = hello(OFFER, dialer, link, nonce)
    proof = hello(PROOF, dialer, link, mac=proof_mac)
    challenge_mac = hello_mac(True, 5, 1, 3, DIALER_NONCE, ACCEPTOR_NONCE)
    challenge = hello(CHALLENGE, 1, 3, ACCEPTOR_NONCE, challenge_mac)
    return {
        "accepted": b"\x00" + offer + proof,
        "plausible": b"\x02" + offer + proof[:40],
        "bad-proof": b"\x00" + offer + hello(PROOF, dialer, link, mac=bytes(32)),
        "other-group": b"\x00" + hello(OFFER, dialer, link, nonce, group=bytes(16)),
        "challenge": b"\x01" + challenge,
        "forged-challenge": b"\x03" + hello(CHALLENGE, 1, 3, ACCEPTOR_NONCE),
    }


def store_value_seeds():
    """Well-formed values of each store record; the first byte picks the parser
    (tests/fuzz/fuzz_store_values.cc)."""
    settings = struct.pack("<I", 2)
    for name, value in ((b"XCCL_ALGO", b"auto"), (b"XCCL_NET_STREAMS", b"2")):
        settings += struct.pack("<I", len(name)) + name + struct.pack("<I", len(value)) + value
    bus = b"0000:19:00.0"
    reason = b"out of memory"
    ipc = struct.pack("<II", 0x43504958, 1) + bytes(range(64))
    ipc += struct.pack("<QqQiQBB", 0x7F0000000000, 4242, 0x1234, 0, 1 << 25, 0, 0)
    ipc += struct.pack("<I", len(bus)) + bus + struct.pack("<I", 0)
    ipc_failed = struct.pack("<II", 0x43504958, 1) + bytes(64)
    ipc_failed += struct.pack("<QqQiQBB", 0, 0, 0, -1, 0, 1, 4)
    ipc_failed += struct.pack("<I", 0) + struct.pack("<I", len(reason)) + reason
    handle = b"xccl:1:00c0ffee12345678:4242-0123456789abcdef:host-a boot 1"
    return {
        "address4": (0, b"10.1.2.3:29500"),
        "address6": (0, b"[fe80::1]:65535"),
        "interfaces": (1, b"E|eth0=10.0.0.1:41000/167772160/4278190080,ib0=[::1]:41001/0/0"),
        "interfaces_found": (1, b"A|?=127.0.0.1:5000/0/0"),
        "handle": (2, handle),
        "membership": (2, handle.replace(b"4242", b"4243") + b"\n" + handle),
        "settings": (3, settings),
        "ipc_record": (4, ipc),
        "ipc_failed": (4, ipc_failed),
        "census": (5, b"1host-a\n0host-b\n1me"),
        "segment": (6, b"+4194304 268435456 xccl-4242-0123456789abcdef"),
        "segment_refused": (6, b"-/dev/shm has 1.0 MiB free"),
        "ring": (15, b"+1048576 xccl-p2p-4242-0123456789abcdef"),
        "window_file": (24, b"+8192 xccl-w4242-0123456789abcdef"),
        "window": (7, b"6 140000000000 4096 81985529216486895 0 2 32 32"),
        # "<mapped bytes> <element size> <registered> <record>": an exact fit, and the issue's
        # 2^30 floats over a 4 KiB window.
        "window_fits": (16, b"4096 4 1 6 140000000000 4096 81985529216486895 0 2 32 32"),
        "window_too_big": (16, b"4096 4 0 6 0 0 0 0 1 1073741824"),
        "address_v6": (8, b"::ffff:10.0.0.1]:80"),
        "tuning": (
            17,
            b"xccl-tuning 1\nworld 4 2 per_host\n"
            b"cpu all_reduce 0 65536 hierarchical two_shot 0 10 20\n"
            b"cpu all_reduce 65536 inf tcp ring 524288 30 40\n"
            b"cpu all_to_all 0 inf tcp direct 0 1 2\n"
            b"gpu all_reduce 0 1048576 kernel one_shot 5 6\n"
            b"gpu all_gather 0 inf vendor none 7 8\n",
        ),
    }


def user_value_seeds():
    """XCCL_* values, cpu lists, JSON and topology files (tests/fuzz/fuzz_user_values.cc): the
    first byte picks the parser, and for a variable which one (byte // 4)."""
    topology = (pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "topo").glob("*.json")
    seeds = {
        "env_level": (0, b"DEBUG"),
        "env_streams": (4 * 4, b"0x10"),
        "env_bytes": (4 * 6, b"1048576"),
        "env_bool": (4 * 10, b"yes"),
        "env_per_collective": (4 * 18, b"all_reduce=1048576,broadcast=never"),  # SHM_CMA_MIN
        "cpus": (1, b"0-3,8,10-11"),
        "json": (2, b'{"a": [1, -2.5e3, "x\\u00e9"], "b": {"c": null, "d": true}}'),
    }
    for path in sorted(topology)[:4]:
        seeds["topo_" + path.stem] = (3, path.read_bytes())
    return seeds


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


OFI_MAGIC = 0x58434F32  # net/transport/ofi/wire.h kMagic
OFI_SESSION = 0x5345535349304E31  # the fuzzer's group session (fuzz_ofi_header.cc)
RAW, CRAFTED, BURST, SIGNAL = range(4)  # fuzz_ofi_header.cc's record ops


def ofi_header(kind=1, space=2, source=1, inline=b"", stream=0, size=None, data_id=0):
    size = len(inline) if size is None else size
    # magic, kind, reserved, source, inlineBytes; the tag and the control fields
    head = struct.pack("<IHHiI", OFI_MAGIC, kind, 0, source, len(inline))
    head += wire_tag(7, space) + wire_control()
    # bytes, stream, dataId, session
    return with_header("<56s4Q", 88, (head, size, stream, data_id, OFI_SESSION), inline)


def crafted(source=1, kind=0, control=0, inline=16, delta=0, mode=1, size=None):
    """One crafted header record: fields in the order fuzz_ofi_header.cc's craft() takes them
    (kind 0: data, 1: control, whose kind is `control`)."""
    record = bytes([CRAFTED, source, 1, kind, 2]) + struct.pack("<H", 7) + bytes([control, mode])
    if mode & 0xC0 != 0xC0:
        record += struct.pack("<H", inline)
    if size is not None:  # mode & 2 without mode & 1: the announced size
        record += struct.pack("<Q", size)
    return record + bytes([delta & 0xFF, 1])


def burst(source=1, count=4200, ahead=1, inline=0, mode=1):
    record = bytes([BURST, source, 1, 0, 2]) + struct.pack("<H", 7) + bytes([0, mode])
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
        "control": group
        + crafted(kind=1, control=ABORT)
        + crafted(kind=1, control=STATUS_QUERY, inline=0)
        + crafted(kind=1, control=STATUS_REPLY),
        "flood": group + burst(),
        "flood_eager": group + burst(count=1100, mode=0xC1),
        "large": group + crafted(mode=2, inline=0, size=1 << 40),
        "raw": group + bytes([RAW]) + struct.pack("<H", len(raw)) + raw,
        "signals": group
        + signal(8, 2, (1 << 48) | 5)
        + signal(8, 2, (5 << 48) | 5)
        + signal(4, 2, (1 << 16) | 9),
    }


# tests/fuzz/fuzz_ofi_auth.cc: a config byte, then ops. Pool: 0 A's nonce, 1 B's nonce, 2 and 3
# the impersonator's (as B, as A), then what sides and signers answered, in order.
AUTH_AS_IS, AUTH_CUT, AUTH_FLIP, AUTH_BYTE, AUTH_RAW, AUTH_FORGED, AUTH_SIGN, AUTH_GRAFT = range(8)
AUTH_TO_B = 8
AUTH_RANK_AT, AUTH_MAC_AT = 8, 40  # offsetof(AuthMessage, rank), (AuthMessage, mac)


def auth_op(kind, pool, *fields, to_b=False, graft_nonce=False):
    first = kind | (AUTH_TO_B if to_b else 0) | (0x10 if graft_nonce else 0)
    return bytes([first, pool, *fields])


def auth_sign(pool, signer, nonce):
    """Signer 0 A's terms, 1 B's, 2 the impersonator's as B, 3 as A; nonce 0 A's, 1 B's, 2, 3."""
    return auth_op(AUTH_SIGN, pool, signer | nonce << 2)


def auth_seeds():
    a_proof, b_proof = 4, 5  # after the two first deliveries below
    exchange = auth_op(AUTH_AS_IS, 1) + auth_op(AUTH_AS_IS, 0, to_b=True)
    proofs = auth_op(AUTH_AS_IS, b_proof) + auth_op(AUTH_AS_IS, a_proof, to_b=True)
    seeds = {
        "exchange": bytes([0]) + exchange + proofs,
        "exchange_3ranks": bytes([0x40]) + exchange + proofs,
        "proof_first": bytes([0x20])
        + auth_op(AUTH_AS_IS, 0, to_b=True)  # B's proof is pool 4
        + auth_op(AUTH_AS_IS, 4)
        + auth_op(AUTH_AS_IS, 1),
        "honest": bytes([0x80, 0, 0, 0, 0]),
        "honest_equal_nonces": bytes([0x88, 1, 2, 0, 1]),
        "honest_drawn_nonces": bytes([0xD8]) + bytes(range(32)) + bytes([1, 1, 1]),
        "reflected": bytes([0x08])
        + auth_op(AUTH_AS_IS, 1)
        + auth_op(AUTH_BYTE, 4, AUTH_RANK_AT, 1)
        + auth_op(AUTH_AS_IS, 4),
        "replayed_nonce": bytes([0])
        + auth_sign(0, 1, 3)  # B's terms with another nonce answer A's nonce: pool 4
        + auth_op(AUTH_AS_IS, 1)
        + auth_op(AUTH_AS_IS, 4),
        "other_nonce_proof": bytes([0]) + auth_sign(3, 1, 1) + auth_op(AUTH_AS_IS, 4),
        "cut": bytes([0]) + auth_op(AUTH_CUT, 1, 71) + auth_op(AUTH_CUT, 0, 73, 0, to_b=True),
        "flipped_mac": bytes([0])
        + exchange
        + auth_op(AUTH_FLIP, b_proof, *struct.pack("<H", AUTH_MAC_AT * 8)),
        "flipped_mac_end": bytes([0])
        + exchange
        + auth_op(AUTH_FLIP, b_proof, *struct.pack("<H", 72 * 8 - 1)),
        "grafted": bytes([0])
        + exchange
        + auth_sign(0, 2, 1)
        + auth_op(AUTH_GRAFT, 6, b_proof, graft_nonce=True)
        + auth_op(AUTH_GRAFT, b_proof, 6),
        "forged": bytes([0]) + auth_op(AUTH_FORGED, 1, 1) + bytes(48),
        "raw": bytes([0]) + auth_op(AUTH_RAW, 0, 72, to_b=True) + bytes(range(72)),
    }
    for variant in range(1, 8):  # the impersonator's proof for A's nonce, then B's nonce to A
        seeds[f"impersonator_{variant}"] = (
            bytes([variant]) + auth_sign(0, 2, 1) + auth_op(AUTH_AS_IS, 4) + auth_op(AUTH_AS_IS, 1)
        )
    return seeds


def tagged(make):
    """Seeds whose first byte picks the parser: {name: (first byte, body)} as whole inputs."""
    return lambda: {name: bytes([first]) + body for name, (first, body) in make().items()}


# Targets whose seed is one whole input (a script or a tagged message), not a stream to cut.
WHOLE_INPUTS = {
    "fuzz_shm_ring",
    "fuzz_tcp_handshake",
    "fuzz_tcp_receive",
    "fuzz_ofi_header",
    "fuzz_ofi_auth",
    "fuzz_store_values",
    "fuzz_user_values",
}


def main():
    target, folder = sys.argv[1], pathlib.Path(sys.argv[2])
    seeds = {
        "fuzz_tcp_frames": frame_seeds,
        "fuzz_tcp_handshake": handshake_seeds,
        "fuzz_tcp_receive": receive_seeds,
        "fuzz_ofi_header": ofi_seeds,
        "fuzz_ofi_auth": auth_seeds,
        "fuzz_shm_ring": shm_ring_seeds,
        "fuzz_store_values": tagged(store_value_seeds),
        "fuzz_user_values": tagged(user_value_seeds),
    }.get(target)
    if seeds is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in seeds().items():
        if target in WHOLE_INPUTS:
            (folder / f"seed-{name}").write_bytes(body)
            continue
        for step in (1, 13, 96):  # one byte, odd cuts, most of a header per read
            (folder / f"seed-{name}-{step}").write_bytes(bytes([step - 1]) + body)


if __name__ == "__main__":
    main()
