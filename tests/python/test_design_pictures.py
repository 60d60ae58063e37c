"""docs/design.md's pictures (docs/images/*.svg) are what scripts/draw_design.py draws from the
tree today, and the script reads the layers from the CMake link rules and the backend's rooms
from its folders, whichever way the tree is cut (a flat backend, rooms as folders, rooms as
libraries, an engine split into a library of its own)."""

import os
import subprocess
import sys

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(REPO, "scripts", "draw_design.py")
sys.path.insert(0, os.path.dirname(SCRIPT))

import draw_design  # noqa: E402


def _write(root, files: dict) -> str:
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="utf-8") as f:
            f.write(text)
    return str(root)


BELOW_BACKEND = {
    "setup.py": 'CMakeExtension("xccl._C", "_C", "csrc/backend")\n',
    "csrc/common/CMakeLists.txt": "add_library(xccl_common STATIC error.cc)\n",
    "csrc/net/CMakeLists.txt": (
        "add_library(xccl_net STATIC factory.cc)\n"
        "target_link_libraries(xccl_net PUBLIC xccl_common)\n"
    ),
    # An engine as a library of its own, in its own folder.
    "csrc/net/transport/tcp/CMakeLists.txt": (
        "add_library(xccl_net_tcp STATIC\n  transport.cc)  # the TCP engine\n"
        "target_link_libraries(xccl_net_tcp PUBLIC xccl_net)\n"
    ),
}


def test_the_committed_pictures_are_what_the_tree_draws():
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--check"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_a_stale_picture_fails_the_check(tmp_path):
    root = _write(tmp_path, BELOW_BACKEND | {"csrc/backend/work.h": ""})
    assert draw_design.main(["--root", root]) == 0
    assert draw_design.main(["--root", root, "--check"]) == 0
    with open(tmp_path / "docs" / "images" / "layers.svg", "a", encoding="utf-8") as f:
        f.write("<!-- edited by hand -->\n")
    assert draw_design.main(["--root", root, "--check"]) == 1


def test_layers_come_from_the_link_rules_with_implied_arrows_left_out(tmp_path):
    root = _write(tmp_path, BELOW_BACKEND | {"csrc/backend/work.h": ""})
    targets = draw_design.Targets(root)
    boxes, arrows = draw_design.layer_graph(root, targets)
    assert boxes["net"] == ("net", "xccl_net, xccl_net_tcp")
    assert ("net", "common") in arrows
    assert draw_design.reduce_arrows(boxes, arrows) == {("net", "common")}


def test_a_flat_backend_is_one_box(tmp_path):
    root = _write(tmp_path, BELOW_BACKEND | {"csrc/backend/a.cc": "", "csrc/backend/a.h": ""})
    boxes, arrows, _ = draw_design.room_graph(root, draw_design.Targets(root))
    assert boxes == {draw_design.TOP_ROOM: ("backend", "2 files, no rooms yet")}
    assert arrows == set()


def test_rooms_as_folders_are_linked_by_their_includes(tmp_path):
    backend = {
        "csrc/backend/CMakeLists.txt": (
            "Python3_add_library(_C MODULE WITH_SOABI module.cc core/group_core.cc cpu/side.cc)\n"
            "target_link_libraries(_C PRIVATE xccl_net_tcp ${XCCL_TORCH_ROOT}/lib/libtorch.so)\n"
        ),
        "csrc/backend/module.cc": '#include "backend/cpu/side.h"\n',
        "csrc/backend/core/group_core.cc": '#include "net/transport/tcp/transport.h"\n',
        "csrc/backend/core/group_core.h": "",
        "csrc/backend/cpu/side.cc": '#include "backend/core/group_core.h"\n',
        "csrc/backend/cpu/side.h": "",
    }
    root = _write(tmp_path, BELOW_BACKEND | backend)
    targets = draw_design.Targets(root)
    boxes, arrows, source = draw_design.room_graph(root, targets)
    assert set(boxes) == {draw_design.TOP_ROOM, "core", "cpu"}
    assert boxes["core"] == ("core", "2 files")
    assert arrows == {(draw_design.TOP_ROOM, "cpu"), ("cpu", "core")}
    assert "includes" in source
    layers, _ = draw_design.layer_graph(root, targets)
    assert layers["backend"] == ("backend", "_C + torch")


def test_rooms_as_libraries_are_linked_by_their_link_rules(tmp_path):
    backend = {
        "csrc/backend/CMakeLists.txt": (
            "Python3_add_library(_C MODULE WITH_SOABI module.cc)\n"
            "target_link_libraries(_C PRIVATE xccl_backend_cpu xccl_backend_core)\n"
        ),
        "csrc/backend/module.cc": "",
        "csrc/backend/core/CMakeLists.txt": (
            "add_library(xccl_backend_core STATIC group_core.cc)\n"
            "target_link_libraries(xccl_backend_core PUBLIC xccl_net_tcp)\n"
        ),
        "csrc/backend/core/group_core.cc": "",
        "csrc/backend/cpu/CMakeLists.txt": (
            "add_library(xccl_backend_cpu STATIC side.cc)\n"
            "target_link_libraries(xccl_backend_cpu PUBLIC xccl_backend_core)\n"
        ),
        "csrc/backend/cpu/side.cc": "",
    }
    root = _write(tmp_path, BELOW_BACKEND | backend)
    targets = draw_design.Targets(root)
    boxes, arrows, source = draw_design.room_graph(root, targets)
    assert set(boxes) == {draw_design.TOP_ROOM, "core", "cpu"}
    assert "CMake links" in source
    assert draw_design.reduce_arrows(boxes, arrows) == {
        (draw_design.TOP_ROOM, "cpu"),
        ("cpu", "core"),
    }
    layers, layer_arrows = draw_design.layer_graph(root, targets)
    assert layers["backend"][1] == "_C, xccl_backend_core, xccl_backend_cpu"
    assert ("backend", "net") in layer_arrows
    # The pictures draw without error for this tree too.
    assert draw_design.main(["--root", root]) == 0


def test_net_folders_are_linked_by_their_includes_with_the_above_engines_box(tmp_path):
    net = {
        "csrc/net/CMakeLists.txt": "set(_above_engines transport/factory.h)\n",
        "csrc/net/rendezvous/store.h": "",
        "csrc/net/transport/transport.h": '#include "net/rendezvous/store.h"\n',
        "csrc/net/transport/factory.h": "",
        "csrc/net/transport/factory.cc": '#include "net/transport/tcp/transport.h"\n',
        "csrc/net/transport/tcp/transport.h": '#include "net/transport/transport.h"\n',
    }
    root = _write(tmp_path, net)
    boxes, arrows = draw_design.net_graph(root)
    assert boxes[draw_design.ABOVE_ENGINES] == (draw_design.ABOVE_ENGINES, "2 files")
    assert boxes["transport"] == ("transport", "1 file")
    assert arrows == {
        (draw_design.ABOVE_ENGINES, "transport/tcp"),
        ("transport/tcp", "transport"),
        ("transport", "rendezvous"),
    }


def test_the_net_folders_include_one_way():
    """rendezvous/ below transport/ below the engines below what joins them: an include back
    down the other way (a rendezvous file including a transport header) makes a cycle here."""
    boxes, arrows = draw_design.net_graph(REPO)
    assert {"rendezvous", "transport", "transport/tcp", "regions/shm"} <= set(boxes)
    level = draw_design.levels(boxes, arrows)
    assert all(level[a] > level[b] for a, b in arrows), sorted(arrows)


def test_every_room_says_what_it_holds():
    """A README.md in every folder of csrc/, every room of csrc/backend and every folder of
    csrc/net (docs/design.md, "Layers"), naming what the folder may include."""
    csrc = os.path.join(REPO, "csrc")
    rooms = []
    for parent in ("", "backend", "net"):
        base = os.path.join(csrc, parent)
        rooms += [os.path.join(base, d) for d in sorted(os.listdir(base))]
    rooms = [r for r in rooms if os.path.isdir(r)]
    assert len(rooms) >= 14, rooms
    missing = [r for r in rooms if not os.path.exists(os.path.join(r, "README.md"))]
    assert not missing, missing
    silent = []
    for room in rooms:
        with open(os.path.join(room, "README.md"), encoding="utf-8") as f:
            text = f.read()
        if "include" not in text:
            silent.append(room)
    assert not silent, f"READMEs that do not say what the folder may include: {silent}"
