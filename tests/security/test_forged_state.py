"""State that a file edit cannot forge (issue #37, item 7), as a user meets it on the command line.

* The probe's first attack: the original kernel's compile-cache entry replaced by a wrong port's binary
  with every hash an editor can compute made to match -- the reference then computed the wrong port's
  answer and ``porter check`` called the wrong port validated (exit 0).  Entries are signed now: the
  forged one is found when the job that used it ends, the job is run again without the cache, the
  verdict is right (exit 1) and a warning names the entry.
* The second: report.json edited by hand from ``failed`` to ``validated`` -- a re-run resumed the row
  (marked ``resumed``) and exited 0.  Reports are signed now: an edited one is not reused at all.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
from fakes.programs import run_porter

pytestmark = pytest.mark.integration

SPEC = """[kernels.{name}]
grid = ["(n + 63) / 64"]
block = ["64"]
sizes = [{{ n = 100 }}]
args = [
  {{ name = "x", role = "in", dtype = "float32", shape = ["n"] }},
  {{ name = "y", role = "out", dtype = "float32", shape = ["n"] }},
  {{ name = "n", role = "scalar", dtype = "int32", value = "n" }},
]
"""


def kernel(name: str, body: str, index: str = "i") -> str:
    return f"""__global__ void {name}(const float* x, float* y, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[{index}] = {body};
}}
"""


@pytest.fixture(autouse=True)
def _emulator(emulator: None) -> None:
    """Every run here is on the CPU emulator (g++)."""


def porter(tmp_path: Path, *args: str, cache: str = "one"):  # noqa: ANN201
    """`porter ARGS` with the cache ``tmp_path/<cache>/cache`` and a state key of this test's own."""
    return run_porter(tmp_path / cache, *args, env={"XDG_CONFIG_HOME": str(tmp_path / "config")})


def binaries(root: Path) -> dict[str, Path]:
    return {p.name: p for p in (root / "binaries").glob("??/*")}


def payload_of(blob: bytes) -> bytes:
    """The payload of an entry, signed (format 3) or hashed (format 2, before signing)."""
    head = 8 + 32 + 8 + 32 + 8 if blob[:8] == b"PORTERC\x03" else 8 + 32 + 32 + 8
    return blob[head:]


def forge(path: Path, payload: bytes) -> None:
    """What an editor without the key can do: the payload swapped, and every check it can compute
    recomputed -- the sha256 and length of the hashed format; the length of the signed one, whose MAC
    it cannot make (kept as it was)."""
    blob = path.read_bytes()
    if blob[:8] == b"PORTERC\x02":
        magic, key, _, _ = struct.unpack_from(">8s32s32sQ", blob)
        digest = hashlib.sha256(b"binaries\0" + payload).digest()
        path.write_bytes(struct.pack(">8s32s32sQ", magic, key, digest, len(payload)) + payload)
        return
    magic, key, ident, mac, _ = struct.unpack_from(">8s32s8s32sQ", blob)
    path.write_bytes(struct.pack(">8s32s8s32sQ", magic, key, ident, mac, len(payload)) + payload)


def test_a_forged_reference_binary_does_not_validate_a_wrong_port(tmp_path: Path) -> None:
    from porter.backends.binaries import decode_binary

    (tmp_path / "orig.cu").write_text(kernel("scale", "2.0f * x[i]"))
    (tmp_path / "orig.cu.porter.toml").write_text(SPEC.format(name="scale"))
    (tmp_path / "wrong.hip").write_text("#include <hip/hip_runtime.h>\n" + kernel("scale", "3.0f * x[i]"))
    orig, wrong = str(tmp_path / "orig.cu"), str(tmp_path / "wrong.hip")

    first = porter(tmp_path, "check", wrong, "--against", orig)
    assert first.returncode == 1, first.stdout + first.stderr
    # the original's own builds: what a check of the original against itself compiles too
    itself = porter(tmp_path, "check", orig, "--against", orig, cache="other")
    assert itself.returncode == 0, itself.stdout + itself.stderr
    entries, reference_keys = (
        binaries(tmp_path / "one" / "cache"),
        set(binaries(tmp_path / "other" / "cache")),
    )
    decoded = {k: decode_binary(payload_of(p.read_bytes())) for k, p in entries.items()}
    wrong_by_arch = {
        b.arch: payload_of(entries[k].read_bytes())
        for k, b in decoded.items()
        if b is not None and b.backend == "cpu" and k not in reference_keys
    }
    swapped = 0
    for k in reference_keys & set(entries):
        b = decoded[k]
        if b is not None and b.backend == "cpu" and b.arch in wrong_by_arch:
            forge(entries[k], wrong_by_arch[b.arch])  # the reference now computes 3 * x
            swapped += 1
    assert swapped, (sorted(entries), sorted(reference_keys))

    again = porter(tmp_path, "check", wrong, "--against", orig)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "NOT validated" in again.stdout
    assert "failed its signature check" in again.stderr and "binaries/" in again.stderr
    # the entry was rebuilt and signed: the next run uses the cache, warns of nothing, and still says no
    third = porter(tmp_path, "check", wrong, "--against", orig)
    assert third.returncode == 1 and "warning" not in third.stderr, third.stderr


def test_a_report_row_edited_to_validated_is_recomputed(tmp_path: Path) -> None:
    """`bad` fails (its original writes past the end of y); `good` validates."""
    source = tmp_path / "src" / "prog.cu"
    source.parent.mkdir()
    source.write_text(kernel("bad", "2.0f * x[i]", index="i + 1") + "\n" + kernel("good", "x[i] + 1.0f"))
    source.with_name("prog.cu.porter.toml").write_text(
        SPEC.format(name="bad") + "\n" + SPEC.format(name="good")
    )
    out = tmp_path / "out"
    args = ("port", str(source), "--to", "hip", "--trials", "1", "--out", str(out), "--json")

    first = porter(tmp_path, *args)
    assert first.returncode == 1, first.stdout + first.stderr
    report = out / "report.json"
    doc = json.loads(report.read_text())
    flipped = 0
    for k in doc["kernels"]:
        for v in k["variants"]:
            if v["status"] == "failed":
                v.update(status="validated", reason="")
                flipped += 1
    assert flipped
    report.write_text(json.dumps(doc, indent=2))

    again = porter(tmp_path, *args)
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"{report} failed its signature check" in again.stderr and "recomputed" in again.stderr
    rows = {k["name"]: k["variants"] for k in json.loads(report.read_text())["kernels"]}
    assert not any(v.get("resumed") for vs in rows.values() for v in vs)
    assert any(v["status"] == "failed" for v in rows["bad"])

    # porter's own report still resumes what it validated, and warns of nothing
    third = porter(tmp_path, *args)
    assert third.returncode == 1 and "warning" not in third.stderr, third.stderr
    rows = {k["name"]: k["variants"] for k in json.loads(report.read_text())["kernels"]}
    assert any(v.get("resumed") and v["status"] == "validated" for v in rows["good"]), rows["good"]


@pytest.mark.parametrize("without", ["", "filesystem"])
def test_sandboxed_children_cannot_read_the_state_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without: str
) -> None:
    """The key that signs caches and reports is out of reach of code porter did not write: Landlock
    reads only the toolchain's folders, and bubblewrap hides porter's config folder too (so it holds
    with the file-system layer off)."""
    import numpy as np
    from porter.backends.pycall import Call, run_calls

    from porter import sandbox, signing

    if without and "bubblewrap" not in {layer.name for layer in sandbox.layers() if layer.active}:
        pytest.skip("bubblewrap does not work here")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("PORTER_SANDBOX_DISABLE", without)
    monkeypatch.setattr(signing, "_KEYS", {})
    key = signing.state_key()
    module = tmp_path / "user" / "peek.py"
    module.parent.mkdir()
    module.write_text(
        "import numpy as np\n\n\n"
        "def peek(out):\n"
        f"    data = open({str(signing.key_path())!r}, 'rb').read()\n"
        "    out[: len(data)] = np.frombuffer(data, np.uint8)\n"
    )
    ran = run_calls(str(module), [Call("peek", {"out": np.zeros(128, np.uint8)})], 60)
    (got,) = ran.results
    assert not got.ok, "a sandboxed child read the state key"
    assert key.hex() not in got.error + got.log + ran.log
