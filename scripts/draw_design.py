#!/usr/bin/env python3
"""Draws docs/design.md's pictures from the tree, so they cannot drift from it:

- docs/images/layers.svg: the layers of csrc/ (one box per folder that defines CMake targets,
  listing them) and the Python package over its extension modules. An arrow A -> B: A may
  include B, read from the CMake link rules (target_link_libraries between the targets of
  csrc/**/CMakeLists.txt, following PUBLIC links as CMake does; the include rule is built from
  the same links, docs/design.md "Layers"). Arrows implied by others are left out.
- docs/images/backend_rooms.svg: the rooms of csrc/backend (its subfolders; the files at its top
  are the c10d face). Where rooms are CMake libraries the arrows are their links, else the
  includes between the rooms' files.
- docs/images/net_folders.svg: the folders of csrc/net (rendezvous, transport and its engines,
  regions), with the headers above the engines (csrc/net/CMakeLists.txt's `_above_engines`) as a
  box of their own. An arrow: the includes between the folders' files.

    python3 scripts/draw_design.py           rewrite the pictures
    python3 scripts/draw_design.py --check   exit 1 when a committed picture differs (CI)

Plain SVG text from the standard library; the output depends only on the tree.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from html import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PICTURES = ("layers.svg", "backend_rooms.svg", "net_folders.svg")
ABOVE_ENGINES = "above the engines"
SOURCES = (".h", ".cc", ".cu", ".cuh", ".inc", ".in")  # what a room's includes are read from
TOP_ROOM = "(top)"


# --- reading the tree --------------------------------------------------------------------------
def cmake_commands(text: str):
    """(command, [arguments]) for each command call of a CMakeLists.txt, comments removed."""
    text = re.sub(r"#[^\n]*", "", text)
    for match in re.finditer(r"\b(\w+)\s*\(", text):
        depth, end = 1, match.end()
        while depth and end < len(text):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        arguments = text[match.end() : end - 1].replace('"', " ").split()
        yield match.group(1).lower(), arguments


def _substitute(arguments: list, variables: dict) -> list:
    """Arguments with ${var} replaced by the variable's value; a list value becomes several."""
    out = []
    for argument in arguments:
        value = re.sub(r"\$\{(\w+)\}", lambda m: variables.get(m.group(1), m.group(0)), argument)
        out += [v for v in value.split(";") if v]
    return out


def _block_end(body: list, index: int) -> int:
    """The index of the endforeach() closing the foreach() whose body starts at `index`."""
    depth = 1
    while index < len(body):
        depth += {"foreach": 1, "endforeach": -1}.get(body[index][0], 0)
        if depth == 0:
            return index
        index += 1
    return index


def _run_body(body: list, variables: dict, functions: dict):
    """The calls a list of commands makes, with its variables: set(), list(APPEND),
    cmake_parse_arguments(), foreach() over a list and calls of `functions` followed (both
    branches of an if() are taken): enough for the helpers and loops that declare targets."""
    index = 0
    while index < len(body):
        command, arguments = body[index]
        index += 1
        if command == "foreach":
            end = _block_end(body, index)
            items = _substitute(arguments[1:], variables)
            items = [i for i in items if i not in ("IN", "LISTS", "ITEMS")]
            if "LISTS" in arguments:
                items = _substitute([f"${{{name}}}" for name in items], variables)
            for item in items:
                inner = {**variables, arguments[0]: item}
                yield from _run_body(body[index:end], inner, functions)
            index = end + 1
            continue
        arguments = _substitute(arguments, variables)
        if command in functions:
            params, inner_body = functions[command]
            inner = {**variables, **dict(zip(params, arguments))}
            inner["ARGN"] = ";".join(arguments[len(params) :])
            yield from _run_body(inner_body, inner, functions)
        elif command == "set" and arguments:
            variables[arguments[0]] = ";".join(arguments[1:])
        elif command == "list" and arguments[:1] == ["APPEND"] and len(arguments) > 1:
            variables[arguments[1]] = ";".join(
                filter(None, [variables.get(arguments[1]), *arguments[2:]])
            )
        elif command == "cmake_parse_arguments" and len(arguments) >= 1:
            # Its keyword lists come first (the empty "" ones are gone), then ${ARGN}'s words.
            prefix, rest, current = arguments[0], arguments[1:], None
            keywords = {k for k in rest if k.isupper() and k == k.strip("_")}
            for item in rest:
                if item in keywords:
                    current = f"{prefix}_{item}"
                    variables.setdefault(current, "")
                elif current:
                    variables[current] = ";".join(filter(None, [variables[current], item]))
        else:
            yield command, arguments


def expand_functions(text: str):
    """cmake_commands(), with the file's own functions and loops followed (a target named
    `xccl_net_${name}` is declared by such a helper, and linked in a foreach)."""
    functions, calls, defining = {}, [], None
    for command, arguments in cmake_commands(text):
        if command == "function":
            defining = (arguments[0].lower(), arguments[1:], [])
        elif command == "endfunction":
            functions[defining[0]] = defining[1:]
            defining = None
        elif defining:
            defining[2].append((command, arguments))
        else:
            calls.append((command, arguments))
    yield from _run_body(calls, {}, functions)


class Targets:
    """The CMake targets of csrc/**/CMakeLists.txt: folder, sources and links of each."""

    def __init__(self, root: str):
        self.folder, self.sources, self.links = {}, {}, {}
        csrc = os.path.join(root, "csrc")
        calls = []
        for folder, dirs, files in os.walk(csrc):
            dirs.sort()
            if "CMakeLists.txt" in files:
                with open(os.path.join(folder, "CMakeLists.txt"), encoding="utf-8") as f:
                    relative = os.path.relpath(folder, csrc).replace(os.sep, "/")
                    calls += [(relative, *call) for call in expand_functions(f.read())]
        for folder, command, arguments in calls:
            if command in ("add_library", "python3_add_library") and arguments:
                self.folder[arguments[0]] = folder
                self.sources[arguments[0]] = self._sources(folder, arguments[1:])
                self.links[arguments[0]] = []
        for folder, command, arguments in calls:
            if command == "target_sources" and arguments[:1] and arguments[0] in self.folder:
                self.sources[arguments[0]] += self._sources(folder, arguments[1:])
            if command == "target_link_libraries" and arguments[:1]:
                public = True
                for item in arguments[1:]:
                    if item in ("PUBLIC", "PRIVATE", "INTERFACE"):
                        public = item != "PRIVATE"
                    elif arguments[0] in self.links:
                        self.links[arguments[0]].append((item, public))

    @staticmethod
    def _sources(folder: str, arguments: list) -> list:
        return [f"{folder}/{a}" for a in arguments if a.endswith(SOURCES) and "$" not in a]

    def external(self, target: str) -> set:
        """What a target links from outside the tree that a reader should know of (torch)."""
        return {"torch" for item, _ in self.links[target] if "TORCH" in item}

    def may_include(self, target: str) -> set:
        """The targets whose headers `target` sees: its links, and their PUBLIC links in turn."""
        seen, todo = set(), [item for item, _ in self.links[target] if item in self.folder]
        while todo:
            item = todo.pop()
            if item not in seen:
                seen.add(item)
                todo += [i for i, public in self.links[item] if public and i in self.folder]
        return seen - {target}


def python_modules(root: str) -> dict:
    """setup.py's extension modules: {module: CMake target}."""
    with open(os.path.join(root, "setup.py"), encoding="utf-8") as f:
        return dict(re.findall(r'CMakeExtension\(\s*"([\w.]+)",\s*"(\w+)"', f.read()))


def layer_graph(root: str, targets: Targets):
    """Boxes {layer: (title, detail)} and arrows {(a, b)} of the layers picture."""
    layers, owner = {}, {}
    for target in sorted(targets.folder):
        layer = targets.folder[target].split("/")[0]
        layers.setdefault(layer, []).append(target)
        owner[target] = layer
    boxes, arrows = {}, set()
    for layer, members in layers.items():
        extern = set().union(*(targets.external(t) for t in members))
        named = ", ".join(members) if len(members) <= 3 else f"{len(members)} libraries"
        boxes[layer] = (layer, " + ".join([named, *sorted(extern)]))
        for target in members:
            arrows |= {(layer, owner[d]) for d in targets.may_include(target) if owner[d] != layer}
    modules = python_modules(root)
    boxes["python"] = ("python", "xccl: " + ", ".join(sorted(m.split(".")[-1] for m in modules)))
    for target in modules.values():
        if target in owner:
            arrows.add(("python", owner[target]))
            arrows |= {("python", owner[d]) for d in targets.may_include(target)}
    return boxes, arrows


def room_of(path: str) -> str:
    """The room of a path below csrc/backend ("core/x.h" -> "core", "x.h" -> TOP_ROOM)."""
    parts = path.split("/")
    return parts[0] if len(parts) > 1 else TOP_ROOM


def room_graph(root: str, targets: Targets):
    """Boxes and arrows of the backend picture, and what the arrows were read from."""
    backend = os.path.join(root, "csrc", "backend")
    files = {}  # every file of each room; its includes are read from the sources among them
    for folder, dirs, names in os.walk(backend):
        dirs.sort()
        for name in sorted(names):
            path = os.path.relpath(os.path.join(folder, name), backend).replace(os.sep, "/")
            files.setdefault(room_of(path), []).append(path)
    boxes = {
        room: (
            "c10d face" if room == TOP_ROOM else room,
            f"{len(paths)} file{'s' * (len(paths) > 1)}",
        )
        for room, paths in sorted(files.items())
    }
    if len(boxes) == 1:
        boxes = {room: ("backend", f"{box[1]}, no rooms yet") for room, box in boxes.items()}
    # A room is a library when a target's sources all lie in it (or its CMakeLists does).
    libraries = {}
    for target, folder in targets.folder.items():
        if folder == "backend" or folder.startswith("backend/"):
            inside = [s.split("/", 1)[1] for s in targets.sources[target]]
            rooms = {room_of(folder.split("/", 1)[1] + "/x")} if "/" in folder else set()
            rooms = rooms or {room_of(path) for path in inside}
            if len(rooms) == 1:
                libraries[target] = rooms.pop()
    arrows = set()
    if len(set(libraries.values())) > 1:
        source = "CMake links between the rooms' libraries"
        for target, room in libraries.items():
            arrows |= {
                (room, libraries[d])
                for d in targets.may_include(target)
                if d in libraries and libraries[d] != room
            }
    else:
        source = "includes between the rooms' files"
        pattern = re.compile(r'^\s*#\s*include\s+"backend/([^"]+)"', re.M)
        for room, paths in files.items():
            for path in filter(lambda p: p.endswith(SOURCES), paths):
                with open(os.path.join(backend, path), encoding="utf-8") as f:
                    for included in pattern.findall(f.read()):
                        if room_of(included) != room and room_of(included) in files:
                            arrows.add((room, room_of(included)))
    return boxes, arrows, source


def net_graph(root: str):
    """Boxes and arrows of the net picture: a box per folder of csrc/net that holds sources
    ("transport/tcp"), the headers above the engines (and their sources) as one box, and an
    arrow where a file includes another folder's header."""
    net = os.path.join(root, "csrc", "net")
    above = set()
    cmake = os.path.join(net, "CMakeLists.txt")
    if os.path.exists(cmake):
        with open(cmake, encoding="utf-8") as f:
            for command, arguments in cmake_commands(f.read()):
                if command == "set" and arguments[:1] == ["_above_engines"]:
                    above = {a.rsplit(".", 1)[0] for a in arguments[1:]}

    def folder_of(path: str) -> str | None:
        if "/" not in path:
            return None  # the folder's own CMakeLists.txt and README
        return ABOVE_ENGINES if path.rsplit(".", 1)[0] in above else path.rsplit("/", 1)[0]

    files = {}
    for folder, dirs, names in os.walk(net):
        dirs.sort()
        for name in sorted(names):
            path = os.path.relpath(os.path.join(folder, name), net).replace(os.sep, "/")
            if path.endswith(SOURCES) and folder_of(path):
                files.setdefault(folder_of(path), []).append(path)
    boxes = {
        room: (room, f"{len(paths)} file{'s' * (len(paths) > 1)}")
        for room, paths in sorted(files.items())
    } or {"net": ("net", "no folders yet")}
    arrows = set()
    pattern = re.compile(r'^\s*#\s*include\s+"net/([^"]+)"', re.M)
    for room, paths in files.items():
        for path in paths:
            with open(os.path.join(net, path), encoding="utf-8") as f:
                for included in pattern.findall(f.read()):
                    other = folder_of(included)
                    if other and other != room and other in files:
                        arrows.add((room, other))
    return boxes, arrows


# --- layout ------------------------------------------------------------------------------------
def reduce_arrows(nodes, arrows: set) -> set:
    """Leaves out an arrow a -> c when a path a -> b -> ... -> c says it already."""

    def reachable(start, skip):
        seen, todo = set(), [b for a, b in arrows if a == start and (a, b) != skip]
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo += [b for a, b in arrows if a == node]
        return seen

    return {(a, c) for a, c in arrows if c not in reachable(a, (a, c))}


def levels(nodes, arrows: set) -> dict:
    """Row of each node: 0 for what depends on nothing, else one above its highest dependency
    (bounded, so a cycle cannot loop)."""
    level = dict.fromkeys(nodes, 0)
    for _ in range(len(level)):
        for a, b in sorted(arrows):
            level[a] = max(level[a], min(level[b] + 1, len(level)))
    return level


def layout(boxes: dict, arrows: set):
    """Rows of boxes (dummies named ("via", a, b, i) where an arrow crosses a row), ordered to
    keep arrows short; returns (rows, paths) with paths[(a, b)] the nodes an arrow passes."""
    level = levels(boxes, arrows)
    rows = [sorted(n for n in boxes if level[n] == r) for r in range(max(level.values()) + 1)]
    paths = {}
    for a, b in sorted(arrows):
        via = [("via", a, b, r) for r in range(level[a] - 1, level[b], -1)]
        for node in via:
            rows[node[3]].append(node)
        paths[(a, b)] = [a, *via, b]
    edges = {(p[i], p[i + 1]) for p in paths.values() for i in range(len(p) - 1)}
    for sweep in range(8):  # barycentres, alternately from above and from below
        order = range(len(rows) - 2, -1, -1) if sweep % 2 == 0 else range(1, len(rows))
        for r in order:
            near = rows[r + 1] if sweep % 2 == 0 else rows[r - 1]
            where, now = {n: i for i, n in enumerate(near)}, list(rows[r])

            def centre(node, where=where, now=now):
                linked = [where[x] for x, y in edges if y == node and x in where]
                linked += [where[y] for x, y in edges if x == node and y in where]
                return sum(linked) / len(linked) if linked else now.index(node)

            rows[r].sort(key=lambda n, c=centre: (c(n), str(n)))
    return rows, paths


# --- drawing -----------------------------------------------------------------------------------
ROW_H, BOX_H, GAP, MARGIN, VIA_W = 86, 44, 28, 20, 12


def box_width(box) -> int:
    title, detail = box
    return int(max(len(title) * 8.4, len(detail) * 6.6)) + 24


def svg(title: str, caption: str, boxes: dict, arrows: set) -> str:
    rows, paths = layout(boxes, arrows)
    widths = {n: box_width(boxes[n]) if n in boxes else VIA_W for row in rows for n in row}
    row_w = [sum(widths[n] for n in row) + GAP * (len(row) - 1) for row in rows]
    width = max([*row_w, len(title) * 8, len(caption) * 6.2]) + 2 * MARGIN
    height = MARGIN + 30 + (len(rows) - 1) * ROW_H + BOX_H + 40
    place = {}
    for r, row in enumerate(rows):
        x = (width - row_w[r]) / 2
        y = MARGIN + 30 + (len(rows) - 1 - r) * ROW_H
        for node in row:
            place[node] = (x, y, widths[node])
            x += widths[node] + GAP
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker>'
        "</defs>",
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>',
        f'<text x="{MARGIN}" y="{MARGIN + 10}" font-size="15" font-weight="bold">'
        f"{escape(title)}</text>",
    ]
    for a, b in sorted(paths, key=str):
        points = []
        for i, node in enumerate(paths[(a, b)]):
            x, y, w = place[node]
            top, bottom = (x + w / 2, y), (x + w / 2, y + BOX_H)
            if node in boxes:
                points.append(bottom if i == 0 else top)
            else:
                points += [top, bottom]
        d = " L".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(
            f'<path d="M{d}" fill="none" stroke="#555" stroke-width="1.3" '
            'marker-end="url(#arrow)"/>'
        )
    for node, (box_title, detail) in sorted(boxes.items()):
        x, y, w = place[node]
        out += [
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{BOX_H}" rx="6" '
            'fill="#eef3fb" stroke="#36c"/>',
            f'<text x="{x + w / 2:.1f}" y="{y + 18:.1f}" font-size="14" text-anchor="middle" '
            f'font-weight="bold">{escape(box_title)}</text>',
            f'<text x="{x + w / 2:.1f}" y="{y + 35:.1f}" font-size="11" text-anchor="middle" '
            f'fill="#333">{escape(detail)}</text>',
        ]
    out.append(
        f'<text x="{MARGIN}" y="{height - 10:.0f}" font-size="11" fill="#333">'
        f"{escape(caption)}</text>"
    )
    return "\n".join(out + ["</svg>", ""])


def pictures(root: str) -> dict:
    targets = Targets(root)
    boxes, arrows = layer_graph(root, targets)
    layers = svg(
        "The layers: csrc/ libraries and the Python package",
        "An arrow: may include and link (read from target_link_libraries); implied ones omitted.",
        boxes,
        reduce_arrows(boxes, arrows),
    )
    boxes, arrows, source = room_graph(root, targets)
    rooms = svg(
        "csrc/backend and its rooms",
        f"An arrow: may use (read from the {source}); implied ones omitted.",
        boxes,
        reduce_arrows(boxes, arrows),
    )
    boxes, arrows = net_graph(root)
    net = svg(
        "csrc/net and its folders",
        "An arrow: includes (read from the files); implied ones omitted.",
        boxes,
        reduce_arrows(boxes, arrows),
    )
    return dict(zip(PICTURES, (layers, rooms, net)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--root", default=ROOT, help="the repository (default: this one)")
    args = parser.parse_args(argv)
    folder = os.path.join(args.root, "docs", "images")
    stale = []
    for name, text in pictures(args.root).items():
        path = os.path.join(folder, name)
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    current = f.read()
            except FileNotFoundError:
                current = None
            if current != text:
                stale.append(f"docs/images/{name}")
        else:
            os.makedirs(folder, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        sys.stderr.write(
            f"draw_design: not what the tree draws now: {', '.join(stale)}; "
            "run python3 scripts/draw_design.py and commit the result\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
