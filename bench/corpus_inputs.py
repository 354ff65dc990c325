"""Input files for the Rodinia programs of the development corpus whose data is not in the corpus.

    python bench/corpus_inputs.py --out DIR [--only hotspot,bfs] [--gpu-sizes]

Rodinia's CUDA programs read their inputs from ``../../data/...``, which the corpus does not hold.  Each
generator here writes small, valid inputs of our own making, in the format the program's reader expects
(learnt from its host code; nothing of Rodinia's data is copied), into ``DIR/<program>/``:

| program   | files                                   | format the reader expects                          |
|-----------|-----------------------------------------|----------------------------------------------------|
| hotspot   | temp_N, power_N                         | one float a line, N*N lines                        |
| hotspot3D | temp_NxL, power_NxL                     | one float a line, N*N*L lines                      |
| bfs       | graphN.txt                              | N; N lines "start degree"; source; E; E lines "dest cost" |
| b_tree    | keys_N.txt, command.txt                 | N then N integer keys; commands "k COUNT", "j COUNT RSIZE" |
| nn        | filelist_S, S_0.db ...                  | absolute paths of files of 48-character hurricane records |
| kmeans    | points_PxF.txt (or .bin with --gpu-sizes) | "id f1 .. fF" lines / int P, int F, P*F floats |
| srad_v1   | image.pgm                               | ASCII PGM (P2), 458 x 502, 3 header lines          |
| cfd       | tet_N.domn                              | nel; per element: volume, 4 x (neighbour, normal) |
| huffman   | symbols_N.in                            | raw bytes, 1024-byte blocks, codes of <= 16 bits    |
| dwt2d     | rgb_N.bmp                               | 24-bit BMP (the program reads its first N*N*3 bytes) |

Every generator is deterministic (a fixed seed per program and size).  A set already written is kept when
its manifest (``.inputs-cpu.json`` / ``.inputs-gpu.json``: each file's SHA-256) matches the files on disk,
so re-running changes no file's time (porter's resume keys hold the --data files' sizes and times).
bench/corpus_runs.toml lists each program's runs on them as ``generated_runs`` / ``generated_gpu_runs``
(``{inputs}``: the program's folder here); bench/corpus_programs.py and bench/opencl_kernel_speed.py
generate the inputs of the programs they run (:func:`prepare`).

srad_v1 and dwt2d open their input at a path relative to the folder they run in (``../../../data/srad/
image.pgm``; ``../../data/dwt2d/`` before the file name given), so their runs need the file placed there;
``generate`` writes it in DIR/<program>/ all the same.  heartwall and leukocyte read AVI video: none here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import struct
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

# a set written by other code than this file's is made again (its manifest holds this digest)
CODE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

Files = dict[str, bytes]  # file name -> content


def _rng(program: str, size: int) -> np.random.Generator:
    """A generator seeded by the program's name and size only: the same files on every machine."""
    seed = int.from_bytes(hashlib.sha256(f"porter:{program}:{size}".encode()).digest()[:8], "little")
    return np.random.default_rng(seed)


def _float_lines(values: np.ndarray, digits: int = 6) -> bytes:
    return "".join(f"{v:.{digits}f}\n" for v in values.ravel().tolist()).encode()


def hotspot(gpu: bool) -> Files:
    """Chip temperatures (K) and power densities, one float a line in row-major order.  The readers
    (hotspot.cu and 3D.cu ``readinput``) take ``fgets`` lines and fail on too few."""
    n = 1024 if gpu else 64
    rng = _rng("hotspot", n)
    y, x = np.mgrid[0:n, 0:n] / n
    # a few hot units on a cool die; the temperature follows them loosely
    power = np.zeros((n, n))
    for cx, cy, r, p in rng.uniform([0.1, 0.1, 0.05, 2e-5], [0.9, 0.9, 0.2, 1e-4], size=(6, 4)):
        power += p * (np.hypot(x - cx, y - cy) < r)
    power += rng.uniform(0, 2e-6, (n, n))
    temp = 323.0 + 2e5 * power + rng.normal(0, 0.5, (n, n))
    return {f"temp_{n}": _float_lines(temp), f"power_{n}": _float_lines(power, 9)}


def hotspot3D(gpu: bool) -> Files:
    """As hotspot's, with `layers` planes: x varies fastest, then y, then the layer (3D.cu ``readinput``
    fills ``vect[i*cols + j + k*rows*cols]`` with k innermost, so the file holds each (i, j)'s layers in
    turn).  The kernel's grid is nx/64 x ny/4 blocks: n must be a multiple of 64."""
    n, layers = (512, 8) if gpu else (64, 8)
    rng = _rng("hotspot3D", n)
    power = rng.uniform(0.0, 1e-3, (n, n, layers))
    power[:, :, 0] *= 4  # the active layer
    temp = 323.0 + 5e3 * power + rng.normal(0, 0.5, (n, n, layers))
    return {f"power_{n}x{layers}": _float_lines(power, 9), f"temp_{n}x{layers}": _float_lines(temp)}


def bfs(gpu: bool) -> Files:
    """An undirected connected graph as bfs.cu reads it: the node count; per node its first edge and edge
    count; the source node; the edge count; per edge its destination and cost."""
    n = 1 << 20 if gpu else 4096
    rng = _rng("bfs", n)
    # a random spanning tree keeps every node reachable; random edges make it a small-world graph
    child = np.arange(1, n)
    parent = (rng.random(n - 1) * child).astype(np.int64)
    extra = 2 * n
    a = np.concatenate([child, rng.integers(0, n, extra)])
    b = np.concatenate([parent, rng.integers(0, n, extra)])
    keep = a != b
    a, b = a[keep], b[keep]
    cost = rng.integers(1, 11, a.size)
    src = np.concatenate([a, b])  # both directions
    dst = np.concatenate([b, a])
    cst = np.concatenate([cost, cost])
    order = np.lexsort((dst, src))
    src, dst, cst = src[order], dst[order], cst[order]
    degree = np.bincount(src, minlength=n)
    start = np.concatenate([[0], np.cumsum(degree)[:-1]])
    out = [f"{n}\n"]
    out += [f"{s} {d}\n" for s, d in zip(start.tolist(), degree.tolist(), strict=True)]
    out.append(f"\n0\n\n{dst.size}\n")
    out += [f"{d} {c}\n" for d, c in zip(dst.tolist(), cst.tolist(), strict=True)]
    return {f"graph{n}.txt": "".join(out).encode()}


def b_tree(gpu: bool) -> Files:
    """The keys (main.c: a count, then one integer a line, each inserted as key and value) and the command
    file: ``k COUNT`` (COUNT searches of random keys) and ``j COUNT RSIZE`` (range searches).  main.c reads
    the number after ``j`` twice (it does not advance past the first), so RSIZE is COUNT in effect; it
    must not exceed the key count.  The command file holds only j, k, digits and white space: other
    letters (i, p, d, ...) make it read stdin."""
    n = 1_000_000 if gpu else 10_000
    rng = _rng("b_tree", n)
    keys = rng.permutation(np.arange(1, n + 1))  # the searches look for keys in [0, n]
    text = f"{n}\n" + "".join(f"{k}\n" for k in keys.tolist())
    count = 10_000 if gpu else 256
    commands = f"j {count} {count}\nk {count}\n"
    return {f"keys_{n}.txt": text.encode(), f"command_{n}.txt": commands.encode()}


NN_NAMES = ("ALDER", "BIRCH", "CEDAR", "DAHLIA", "ELM", "FERN", "GINKGO", "HAZEL", "IRIS", "JUNIPER")


def nn_records(rng: np.random.Generator, count: int) -> bytes:
    """Hurricane records as nn_cuda.cu reads them: 48 characters and a newline, the latitude in
    columns 28-32 and the longitude in 33-37 (``%5.1f`` fields from column 27 and 33)."""
    year = rng.integers(1950, 2005, count)
    month = rng.integers(1, 13, count)
    day = rng.integers(1, 29, count)
    hour = rng.choice([0, 6, 12, 18], count)
    num = rng.integers(1, 29, count)
    name = rng.integers(0, len(NN_NAMES), count)
    lat = rng.uniform(7.0, 70.0, count)
    lng = rng.uniform(0.0, 358.0, count)
    speed = rng.integers(10, 165, count)
    press = rng.integers(0, 900, count)
    rows = zip(
        year.tolist(), month.tolist(), day.tolist(), hour.tolist(), num.tolist(), name.tolist(),
        lat.tolist(), lng.tolist(), speed.tolist(), press.tolist(), strict=True,
    )  # fmt: skip
    lines = [
        f"{y:4d} {m:2d} {d:2d} {h:2d} {u:2d} {NN_NAMES[k]:<9s} {la:5.1f} {lo:5.1f} {s:4d} {p:4d}\n"
        for y, m, d, h, u, k, la, lo, s, p in rows
    ]
    return "".join(lines).encode()


NN_PATH_MAX = 63  # nn_cuda.cu reads each file name of the list into char[64]


def nn(gpu: bool, folder: Path) -> Files:
    """Four files of hurricane records and the list naming them.  The list holds absolute paths (the
    program opens them from wherever it runs), each shorter than 64 characters."""
    tag, per_file = ("gpu", 65_536) if gpu else ("cpu", 1_024)
    rng = _rng("nn", per_file)
    files: Files = {}
    names = []
    for i in range(4):
        name = f"{tag}_{i}.db"
        files[name] = nn_records(rng, per_file)
        path = str(folder.resolve() / name)
        if len(path) > NN_PATH_MAX:
            raise ValueError(f"nn: {path} is {len(path)} characters; nn reads at most {NN_PATH_MAX}")
        names.append(path)
    files[f"filelist_{tag}"] = "".join(f"{p}\n" for p in names).encode()
    return files


def kmeans(gpu: bool) -> Files:
    """Points in five Gaussian clusters of 34 features.  Text (kmeans.c without -b): one line per point,
    an id and the features, under 1024 characters; binary (-b): int points, int features, the floats."""
    points, features = (204_800, 34) if gpu else (2_000, 34)
    rng = _rng("kmeans", points)
    centres = rng.uniform(0.0, 30.0, (5, features))
    which = rng.integers(0, 5, points)
    data = (centres[which] + rng.normal(0.0, 10.0, (points, features))).astype(np.float32)
    if gpu:
        return {f"points_{points}x{features}.bin": struct.pack("<ii", points, features) + data.tobytes()}
    lines = [f"{i + 1} " + " ".join(f"{v:.3f}" for v in row) + "\n" for i, row in enumerate(data.tolist())]
    return {f"points_{points}x{features}.txt": "".join(lines).encode()}


SRAD_ROWS, SRAD_COLS = 502, 458  # main.cu reads an image of exactly this size, whatever it is asked


def srad_v1(gpu: bool) -> Files:
    """A speckled image (an organ-like bright ellipse on a dark field, multiplicative noise) as an ASCII
    PGM: main.cu skips three header lines, then reads 502 x 458 integers.  One size serves both sets."""
    rng = _rng("srad_v1", SRAD_ROWS)
    y, x = np.mgrid[0:SRAD_ROWS, 0:SRAD_COLS]
    inside = ((x - 230) / 150.0) ** 2 + ((y - 250) / 190.0) ** 2 < 1.0
    base = np.where(inside, 170.0, 60.0) + 20 * np.sin(x / 23.0) * np.cos(y / 31.0)
    img = np.clip(base * rng.gamma(4.0, 0.25, base.shape), 0, 255).astype(int)
    rows = "".join(" ".join(map(str, r)) + "\n" for r in img.tolist())
    return {"image.pgm": f"P2\n{SRAD_COLS} {SRAD_ROWS}\n255\n{rows}".encode()}


def cfd_mesh(n: int, h: float = 0.01) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An n x n x n block of cubes (side h), each cut into six tetrahedra along its main diagonal (the
    Kuhn subdivision: neighbouring cubes' faces match).  Returns each tetrahedron's volume, its four
    neighbours as euler3d.cu reads them (1-based; 0: a wall; -1: the far field) and its four outward
    face normals scaled by the face's area."""
    side = n + 1
    cubes = np.stack(np.meshgrid(*(np.arange(n),) * 3, indexing="ij"), -1).reshape(-1, 3)
    perms = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    steps = np.eye(3, dtype=np.int64)
    corners = []  # per tetrahedron kind, its 4 corner offsets in the cube
    for p in perms:
        path = [np.zeros(3, np.int64)]
        for axis in p:
            path.append(path[-1] + steps[axis])
        corners.append(np.stack(path))
    offs = np.stack(corners)  # (6, 4, 3)
    verts = cubes[:, None, None, :] + offs[None]  # (cubes, 6, 4, 3)
    verts = verts.reshape(-1, 4, 3)
    tets = verts.shape[0]
    ids = (verts[..., 0] * side + verts[..., 1]) * side + verts[..., 2]  # (tets, 4)
    pos = verts.astype(np.float64) * h
    a, b, c, d = (pos[:, i] for i in range(4))
    volume = np.abs(np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a))) / 6.0
    # face j leaves out corner j
    faces = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
    normals = np.zeros((tets, 4, 3))
    keys = np.zeros((tets, 4), np.int64)
    total = side**3
    for j, (f0, f1, f2) in enumerate(faces):
        p0, p1, p2, opposite = pos[:, f0], pos[:, f1], pos[:, f2], pos[:, j]
        nrm = 0.5 * np.cross(p1 - p0, p2 - p0)
        flip = np.einsum("ij,ij->i", nrm, p0 - opposite) < 0
        nrm[flip] *= -1
        normals[:, j] = nrm
        tri = np.sort(ids[:, [f0, f1, f2]], axis=1)
        keys[:, j] = (tri[:, 0] * total + tri[:, 1]) * total + tri[:, 2]
    flat = keys.ravel()
    order = np.argsort(flat, kind="stable")
    sorted_keys = flat[order]
    shared = np.full(flat.size, -1, np.int64)  # the far field unless shared
    same = sorted_keys[1:] == sorted_keys[:-1]
    first, second = order[:-1][same], order[1:][same]
    shared[first] = second // 4 + 1
    shared[second] = first // 4 + 1
    neighbour = shared.reshape(tets, 4)
    # a wall: the boundary faces of the plane x = n*h (the flow, along x, runs into it)
    centre_x = pos[:, faces, 0].mean(axis=2)  # (tets, 4)
    wall = (neighbour == -1) & np.isclose(centre_x, n * h)
    neighbour[wall] = 0
    return volume, neighbour, normals


def cfd(gpu: bool) -> Files:
    """A tetrahedral mesh as euler3d.cu (and pre_euler3d, the double versions) read it: the element
    count, then per element its volume and, for each of its four faces, the neighbour and the normal."""
    n = 24 if gpu else 4
    volume, neighbour, normals = cfd_mesh(n)
    lines = [f"{volume.size}\n"]
    for v, nb, nrm in zip(volume.tolist(), neighbour.tolist(), normals.tolist(), strict=True):
        parts = [f"{v:.9g}"]
        for k in range(4):
            parts.append(f"{nb[k]} {nrm[k][0]:.9g} {nrm[k][1]:.9g} {nrm[k][2]:.9g}")
        lines.append(" ".join(parts) + "\n")
    return {f"tet_{volume.size}.domn": "".join(lines).encode()}


def huffman(gpu: bool) -> Files:
    """Raw bytes for PAVLE's encoder.  main_test_cu.cu takes the file's size in 4-byte words, 256 words a
    block (pack2 runs blocks/16 groups of 16: a multiple of 16 blocks); each 4-byte word's codes must
    fit 64 bits, so every code is at most 16 bits: 24 symbols of a geometric distribution whose rarest
    is common enough.  The histogram reads only the first quarter of the file (and a bit): the
    distribution is the same throughout, so every symbol is counted."""
    size = 1 << 24 if gpu else 1 << 16
    rng = _rng("huffman", size)
    symbols = np.array([ord(c) for c in "etaoinshrdlucmfwypvbgkjq"], np.uint8)
    p = 0.8 ** np.arange(symbols.size)
    data = rng.choice(symbols, size, p=p / p.sum())
    return {f"symbols_{size}.in": data.astype(np.uint8).tobytes()}


def dwt2d(gpu: bool) -> Files:
    """A 24-bit BMP of n x n: smooth colour gradients, a disc and some noise.  main.cu does not parse
    it: it reads the first n*n*3 bytes of the file (header included) as RGB, which a BMP of that size has."""
    n = 1024 if gpu else 192
    rng = _rng("dwt2d", n)
    y, x = np.mgrid[0:n, 0:n] / n
    disc = np.hypot(x - 0.6, y - 0.4) < 0.25
    r = 255 * x
    g = 255 * y
    b = 128 + 100 * np.sin(8 * x) * np.cos(6 * y) + 60 * disc
    rgb = np.stack([r, g, b], -1) + rng.normal(0, 6, (n, n, 3))
    pixels = np.clip(rgb, 0, 255).astype(np.uint8)[::-1, :, ::-1]  # bottom-up rows, BGR
    row = n * 3
    pad = (4 - row % 4) % 4
    body = b"".join(line.tobytes() + b"\0" * pad for line in pixels)
    header = b"BM" + struct.pack("<IHHI", 54 + len(body), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, n, n, 1, 24, 0, len(body), 2835, 2835, 0, 0)
    return {f"rgb_{n}.bmp": header + info + body}


def avi(frames: list[np.ndarray]) -> bytes:
    """An uncompressed 8-bit AVI as Rodinia's avilib reads it (heartwall, leukocyte): the RIFF header, a
    ``hdrl`` list whose video stream header and BITMAPINFOHEADER give the frame count, width and height, and a
    ``movi`` list of one ``00db`` chunk per frame, each frame's rows bottom-up as a DIB stores them (avilib
    has no ``idx1`` to read: it finds the chunks by scanning ``movi``)."""
    height, width = frames[0].shape

    def chunk(tag: bytes, body: bytes) -> bytes:
        return tag + struct.pack("<I", len(body)) + body + b"\0" * (len(body) % 2)

    def lst(kind: bytes, body: bytes) -> bytes:
        return chunk(b"LIST", kind + body)

    size = width * height
    avih = struct.pack("<14I", 40000, size * 25, 0, 0x10, len(frames), 0, 1, size, width, height, 0, 0, 0, 0)
    strh = (
        b"vids"
        + b"DIB "
        + struct.pack("<IHHIIIIIIiI4h", 0, 0, 0, 0, 1, 25, 0, len(frames), size, -1, 0, 0, 0, width, height)
    )
    strf = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 0, size, 0, 0, 256, 0) + bytes(
        v for i in range(256) for v in (i, i, i, 0)
    )
    hdrl = lst(b"hdrl", chunk(b"avih", avih) + lst(b"strl", chunk(b"strh", strh) + chunk(b"strf", strf)))
    movi = lst(b"movi", b"".join(chunk(b"00db", np.ascontiguousarray(f[::-1]).tobytes()) for f in frames))
    return chunk(b"RIFF", b"AVI " + hdrl + movi)


def heartwall(gpu: bool) -> Files:
    """An ultrasound-like video of 609 x 590 pixels (the size of Rodinia's test.avi, whose wall points
    main.cu hardcodes): speckle over a dark field, a bright ring around the points' centre that moves a few
    pixels from frame to frame, so each point's template has something to follow."""
    count = 20 if gpu else 3
    rng = _rng("heartwall", count)
    y, x = np.mgrid[0:590, 0:609].astype(np.float64)
    frames = []
    for k in range(count):
        cy, cx = 380 + 3 * np.sin(k / 3), 320 + 2 * np.cos(k / 4)
        r = np.hypot(y - cy, x - cx)
        ring = 150 * np.exp(-(((r - 95) / 14) ** 2)) + 110 * np.exp(-(((r - 150) / 18) ** 2))
        speckle = rng.gamma(4.0, 0.25, y.shape)
        frames.append(np.clip((30 + ring) * speckle, 0, 255).astype(np.uint8))
    return {f"heart_{count}.avi": avi(frames)}


GENERATORS: dict[str, Callable[[bool, Path], Files]] = {
    "hotspot": lambda gpu, _folder: hotspot(gpu),
    "hotspot3D": lambda gpu, _folder: hotspot3D(gpu),
    "bfs": lambda gpu, _folder: bfs(gpu),
    "b_tree": lambda gpu, _folder: b_tree(gpu),
    "nn": nn,
    "kmeans": lambda gpu, _folder: kmeans(gpu),
    "srad_v1": lambda gpu, _folder: srad_v1(gpu),
    "cfd": lambda gpu, _folder: cfd(gpu),
    "huffman": lambda gpu, _folder: huffman(gpu),
    "dwt2d": lambda gpu, _folder: dwt2d(gpu),
    "heartwall": lambda gpu, _folder: heartwall(gpu),
}
PROGRAMS = tuple(GENERATORS)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def generate(program: str, folder: Path, gpu: bool = False) -> list[Path]:
    """Write `program`'s inputs (its GPU sizes with `gpu`) into `folder`; returns their paths.  A set
    whose manifest matches the files on disk is left as it is; a file whose content is unchanged is not
    rewritten."""
    if program not in GENERATORS:
        raise KeyError(f"no input generator for {program!r} (known: {', '.join(PROGRAMS)})")
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / f".inputs-{'gpu' if gpu else 'cpu'}.json"
    key = {"code": CODE, "program": program, "folder": str(folder.resolve())}
    try:
        old = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    if old.get("key") == key and all(
        (folder / name).is_file() and _sha256(folder / name) == digest
        for name, digest in old.get("files", {}).items()
    ):
        return [folder / name for name in old["files"]]
    files = GENERATORS[program](gpu, folder)
    for name, content in files.items():
        path = folder / name
        if path.is_file() and path.stat().st_size == len(content) and path.read_bytes() == content:
            continue
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_bytes(content)
        tmp.replace(path)
    digests = {name: hashlib.sha256(content).hexdigest() for name, content in files.items()}
    manifest.write_text(json.dumps({"key": key, "files": digests}, indent=1) + "\n", encoding="utf-8")
    return [folder / name for name in files]


def generated_runs(entry: Mapping[str, Any], gpu: bool) -> list[str]:
    """A corpus_runs.toml entry's runs on generated inputs: its ``generated_gpu_runs`` with `gpu` where it
    has them, else its ``generated_runs``."""
    chosen = (entry.get("generated_gpu_runs") if gpu else None) or entry.get("generated_runs") or []
    return [str(r) for r in chosen]


def prepare(
    name: str, entry: Mapping[str, Any], inputs_root: Path, gpu: bool
) -> tuple[list[str], Path | None]:
    """The runs of corpus_runs.toml's program `name` and the folder they read (porter port --data), if
    any.  A program with generated runs gets its inputs written into ``inputs_root/name`` (its GPU sizes
    with `gpu` where it has them), and those runs with ``{inputs}`` replaced by that folder; any other
    its ``gpu_runs`` (with `gpu`) or ``runs``, and no folder."""
    runs = generated_runs(entry, gpu)
    if not runs:
        plain = (entry.get("gpu_runs") if gpu else None) or entry.get("runs") or []
        return [str(r) for r in plain], None
    if entry.get("placed"):  # its inputs go where it opens them, beside a copy of it: placed()
        return runs, None
    folder = (inputs_root / name).resolve()
    generate(name, folder, gpu=gpu and bool(entry.get("generated_gpu_runs")))
    return [r.replace("{inputs}", str(folder)) for r in runs], folder


def placed(
    name: str, entry: Mapping[str, Any], corpus: Path, inputs_root: Path, gpu: bool
) -> tuple[Path, Path] | None:
    """For a program that opens its input at a path relative to the folder it runs in (``placed`` in
    corpus_runs.toml, e.g. ``../../../data/srad``: srad_v1, dwt2d), a copy of its folder under
    ``inputs_root/name`` at the same depth, its inputs written where that path leads from the copy: (the
    copy, the data folder the runs read, for porter port --data).  None for any other program.  The corpus
    itself is never written."""
    where = entry.get("placed")
    if not where:
        return None
    parts = Path(str(where)).parts
    ups = sum(1 for part in parts if part == "..")
    program = corpus / str(entry["path"])
    root = (inputs_root / name / "placed").resolve()
    copy = root.joinpath(*program.parts[-ups:])
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(program, copy, symlinks=True)
    target = (copy / where).resolve()
    generate(name, target, gpu=gpu and bool(entry.get("generated_gpu_runs")))
    return copy, root / parts[ups]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--out", required=True, help="the folder: DIR/<program>/ gets each program's inputs")
    ap.add_argument("--only", default="", help="programs, comma-separated (default: every one)")
    ap.add_argument("--gpu-sizes", action="store_true", help="the larger inputs, for timing on a GPU")
    args = ap.parse_args(argv)
    wanted = [w for w in args.only.split(",") if w] or list(PROGRAMS)
    unknown = [w for w in wanted if w not in GENERATORS]
    if unknown:
        print(f"corpus_inputs: unknown program(s) {', '.join(unknown)}; known: {', '.join(PROGRAMS)}")
        return 2
    for program in wanted:
        paths = generate(program, Path(args.out) / program, gpu=args.gpu_sizes)
        print(f"{program}: {', '.join(str(p) for p in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
