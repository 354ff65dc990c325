"""bench/corpus_inputs.py: each generated input has the layout its Rodinia program's reader needs, the
same bytes on every call, and every file bench/corpus_runs.toml's generated runs name."""

from __future__ import annotations

import heapq
import re
import struct
import tempfile
import tomllib
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench_scripts import load

ROOT = Path(__file__).resolve().parents[2]


ci = load("corpus_inputs")


@pytest.fixture(scope="module")
def inputs() -> Iterator[Path]:
    # a short folder: nn's list holds absolute paths of fewer than 64 characters
    with tempfile.TemporaryDirectory(prefix="ci-", dir="/tmp") as out:
        for program in ci.PROGRAMS:
            ci.generate(program, Path(out) / program)
        yield Path(out)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ci-", dir="/tmp") as out:
        yield Path(out)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="ascii").splitlines()


def test_hotspot_one_float_a_line(inputs: Path) -> None:
    temp, power = _lines(inputs / "hotspot" / "temp_64"), _lines(inputs / "hotspot" / "power_64")
    assert len(temp) == len(power) == 64 * 64
    assert all(300.0 < float(t) < 400.0 for t in temp)
    assert all(0.0 <= float(p) < 1.0 for p in power)


def test_hotspot3d_layers_and_a_grid_of_64_columns(inputs: Path) -> None:
    folder = inputs / "hotspot3D"
    for name in ("power_64x8", "temp_64x8"):
        values = [float(v) for v in _lines(folder / name)]
        assert len(values) == 64 * 64 * 8
    assert all(300.0 < float(t) < 400.0 for t in _lines(folder / "temp_64x8"))


def test_bfs_graph_is_consistent_symmetric_and_connected(inputs: Path) -> None:
    tokens = [int(t) for t in (inputs / "bfs" / "graph4096.txt").read_text().split()]
    n = tokens[0]
    nodes = [(tokens[1 + 2 * i], tokens[2 + 2 * i]) for i in range(n)]
    at = 1 + 2 * n
    source, edges = tokens[at], tokens[at + 1]
    pairs = tokens[at + 2 :]
    assert n == 4096 and 0 <= source < n and len(pairs) == 2 * edges
    assert sum(d for _, d in nodes) == edges
    assert all(nodes[i][0] + nodes[i][1] == nodes[i + 1][0] for i in range(n - 1))
    dest, cost = pairs[0::2], pairs[1::2]
    assert all(0 <= d < n for d in dest) and all(c > 0 for c in cost)
    adjacency = [dest[s : s + d] for s, d in nodes]
    arcs = Counter((i, j) for i, out in enumerate(adjacency) for j in out)
    assert all(arcs[(j, i)] == k for (i, j), k in arcs.items())  # undirected
    seen, queue = {source}, deque([source])
    while queue:
        for j in adjacency[queue.popleft()]:
            if j not in seen:
                seen.add(j)
                queue.append(j)
    assert len(seen) == n


def test_b_tree_keys_and_commands(inputs: Path) -> None:
    keys = [int(k) for k in _lines(inputs / "b_tree" / "keys_10000.txt")]
    assert keys[0] == len(keys) - 1 == 10_000
    assert sorted(keys[1:]) == list(range(1, 10_001))
    commands = (inputs / "b_tree" / "command_10000.txt").read_text()
    assert re.fullmatch(r"[jk0-9 \n]*", commands)  # any other letter makes main.c read stdin
    for line in commands.splitlines():
        word, *numbers = line.split()
        assert word in ("j", "k") and all(0 < int(x) <= 10_000 for x in numbers)
        assert int(numbers[0]) <= 65_535


def test_nn_records_and_list(inputs: Path) -> None:
    listed = _lines(inputs / "nn" / "filelist_cpu")
    assert len(listed) == 4
    for name in listed:
        path = Path(name)
        assert path.is_absolute() and path.is_file() and len(name) < 64
        raw = path.read_bytes()
        assert len(raw) % 49 == 0 and len(raw) // 49 == 1024
        for i in range(0, len(raw), 49 * 97):
            record = raw[i : i + 49].decode("ascii")
            assert record[48] == "\n"
            assert 7.0 <= float(record[28:33]) <= 70.0
            assert 0.0 <= float(record[33:38]) <= 358.0


def test_nn_refuses_a_path_the_program_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="characters"):
        ci.generate("nn", tmp_path / ("x" * 64))


def test_kmeans_text_points(inputs: Path) -> None:
    lines = _lines(inputs / "kmeans" / "points_2000x34.txt")
    assert len(lines) == 2000
    for i, line in enumerate(lines):
        fields = line.split()
        assert len(line) < 1023 and len(fields) == 35 and int(fields[0]) == i + 1
        [float(x) for x in fields[1:]]


def test_kmeans_binary_header() -> None:
    files = ci.kmeans(gpu=True)
    ((name, raw),) = files.items()
    points, features = struct.unpack("<ii", raw[:8])
    assert name.endswith(".bin") and len(raw) == 8 + 4 * points * features


def test_srad_v1_pgm(inputs: Path) -> None:
    lines = _lines(inputs / "srad_v1" / "image.pgm")
    assert lines[:3] == ["P2", "458 502", "255"]  # main.cu skips three lines
    values = [int(v) for line in lines[3:] for v in line.split()]
    assert len(values) == 502 * 458 and min(values) >= 0 and max(values) <= 255


def test_cfd_mesh_is_a_closed_consistent_tetrahedral_mesh(inputs: Path) -> None:
    tokens = (inputs / "cfd" / "tet_384.domn").read_text().split()
    nel = int(tokens[0])
    assert nel == 384 and len(tokens) == 1 + nel * 17
    faces: dict[int, list[tuple[int, tuple[float, float, float]]]] = {}
    for i in range(nel):
        row = tokens[1 + 17 * i : 1 + 17 * (i + 1)]
        assert float(row[0]) > 0.0  # the volume
        faces[i] = [
            (int(row[1 + 4 * j]), (float(row[2 + 4 * j]), float(row[3 + 4 * j]), float(row[4 + 4 * j])))
            for j in range(4)
        ]
    kinds: Counter[str] = Counter()
    for i, four in faces.items():
        closed = [sum(n[k] for _, n in four) for k in range(3)]
        assert all(abs(x) < 1e-9 for x in closed)  # a closed cell: its area vectors sum to zero
        for nb, normal in four:
            kinds["wall" if nb == 0 else "far" if nb < 0 else "inner"] += 1
            if nb > 0:  # 1-based; the neighbour sees this cell through the opposite normal
                back = [n for m, n in faces[nb - 1] if m == i + 1]
                assert len(back) == 1
                assert all(abs(a + b) < 1e-12 for a, b in zip(normal, back[0], strict=True))
    assert kinds["wall"] and kinds["far"] and kinds["inner"]


def _huffman_lengths(freqs: Counter[int]) -> list[int]:
    heap = [(f, [s]) for s, f in freqs.items()]
    heapq.heapify(heap)
    depth = Counter[int]()
    while len(heap) > 1:
        fa, a = heapq.heappop(heap)
        fb, b = heapq.heappop(heap)
        for s in a + b:
            depth[s] += 1
        heapq.heappush(heap, (fa + fb, a + b))
    return list(depth.values())


def test_huffman_blocks_and_code_lengths(inputs: Path) -> None:
    raw = (inputs / "huffman" / "symbols_65536.in").read_bytes()
    assert len(raw) % (1024 * 16) == 0  # 256 four-byte words a block, a multiple of 16 blocks
    lengths = _huffman_lengths(Counter(raw))
    assert max(lengths) <= 16  # PAVLE packs a word's four codes into 64 bits
    # the program's histogram sees only the start of the file: every symbol is there too
    assert set(raw[: len(raw) // 4]) == set(raw)


def test_dwt2d_bmp(inputs: Path) -> None:
    raw = (inputs / "dwt2d" / "rgb_192.bmp").read_bytes()
    assert raw[:2] == b"BM" and struct.unpack("<I", raw[2:6])[0] == len(raw)
    width, height, _planes, bits = struct.unpack("<iiHH", raw[18:30])
    assert (width, height, bits) == (192, 192, 24)
    assert len(raw) >= width * height * 3  # main.cu reads this many bytes from the start


def test_same_bytes_every_time_and_files_left_alone(inputs: Path, short_tmp: Path) -> None:
    tmp_path = short_tmp
    for program in ci.PROGRAMS:
        again = ci.generate(program, tmp_path / program)
        for path in again:
            first = inputs / program / path.name
            if program == "nn" and path.name.startswith("filelist"):
                assert [Path(p).name for p in _lines(path)] == [Path(p).name for p in _lines(first)]
            else:
                assert path.read_bytes() == first.read_bytes(), path.name
    times = {p: p.stat().st_mtime_ns for p in (tmp_path / "hotspot").iterdir()}
    ci.generate("hotspot", tmp_path / "hotspot")
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "hotspot").iterdir()} == times
    (tmp_path / "hotspot" / "temp_64").write_text("changed\n")
    ci.generate("hotspot", tmp_path / "hotspot")
    assert (tmp_path / "hotspot" / "temp_64").read_bytes() == (inputs / "hotspot" / "temp_64").read_bytes()


def test_corpus_runs_name_only_generated_files(inputs: Path) -> None:
    table = tomllib.loads((ROOT / "bench" / "corpus_runs.toml").read_text(encoding="utf-8"))
    assert {"generated_runs", "generated_gpu_runs"} <= set(table["ignore"])
    with_runs = {n: e for n, e in table["programs"].items() if e.get("generated_runs")}
    assert set(with_runs) <= set(ci.PROGRAMS) and {"hotspot", "bfs", "cfd"} <= set(with_runs)
    for name, entry in with_runs.items():
        assert entry["runs"] == []
        if entry.get("placed"):  # written beside a copy of the program: placed(), the test below
            continue
        runs, data = ci.prepare(name, entry, inputs, gpu=False)
        assert data == (inputs / name).resolve()
        for run in runs:
            assert "{inputs}" not in run
            for word in run.split():
                if word.startswith(str(data)):
                    assert Path(word).is_file(), (name, word)
        gpu_names = {
            m.group(1)
            for r in entry.get("generated_gpu_runs", [])
            for m in re.finditer(r"\{inputs\}/(\S+)", r)
        }
        assert gpu_names, name
    plain = table["programs"]["backprop"]
    assert ci.prepare("backprop", plain, inputs, gpu=True) == (plain["gpu_runs"], None)


def test_a_program_opening_its_input_beside_its_folder_gets_a_copy_with_the_input_placed(
    tmp_path: Path,
) -> None:
    """srad_v1 opens ../../../data/srad/image.pgm from where it runs: placed() copies its folder at the same
    depth under the inputs folder, writes the image where that path leads from the copy, and names the
    data folder its runs read; the corpus is not written."""
    corpus = tmp_path / "corpus"
    program = corpus / "rodinia" / "cuda" / "srad" / "srad_v1"
    program.mkdir(parents=True)
    (program / "main.cu").write_text("int main() { return 0; }\n", encoding="utf-8")
    entry = tomllib.loads((ROOT / "bench" / "corpus_runs.toml").read_text(encoding="utf-8"))["programs"][
        "srad_v1"
    ]
    assert ci.prepare("srad_v1", entry, tmp_path / "inputs", False) == (entry["generated_runs"], None)
    copy, data = ci.placed("srad_v1", entry, corpus, tmp_path / "inputs", False)
    assert copy == (tmp_path / "inputs" / "srad_v1" / "placed" / "cuda" / "srad" / "srad_v1").resolve()
    assert (copy / "main.cu").is_file() and data == copy.parents[2] / "data"
    assert (copy / "../../../data/srad/image.pgm").resolve().is_file()
    assert sorted(p.name for p in corpus.rglob("*")) == ["cuda", "main.cu", "rodinia", "srad", "srad_v1"]
    assert ci.placed("hotspot", {"path": "rodinia/cuda/hotspot"}, corpus, tmp_path / "inputs", False) is None
    # dwt2d: ../../data/dwt2d/ before the file name its run gives, at either size
    (corpus / "rodinia" / "cuda" / "dwt2d").mkdir()
    dwt = tomllib.loads((ROOT / "bench" / "corpus_runs.toml").read_text(encoding="utf-8"))["programs"][
        "dwt2d"
    ]
    for gpu, run in ((False, dwt["generated_runs"][0]), (True, dwt["generated_gpu_runs"][0])):
        copy, data = ci.placed("dwt2d", dwt, corpus, tmp_path / "inputs", gpu)
        assert data == copy.parents[1] / "data" and (data / "dwt2d" / run.split()[1]).is_file(), run
