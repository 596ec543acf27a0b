"""`wgcompute process` under faults, run as a user runs it (a subprocess): killed mid-run and
run again, outputs that cannot be created or written, corrupt and empty inputs. Each case
returns what happened in a few words; docs/reliability.md lists them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ENV = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
PIPE = "gaussian_blur(radius=2, sigma=1.0) | invert | grayscale"


def cli(*args, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgcompute", "process", *map(str, args),
                           "--no-progress"], capture_output=True, text=True, env=ENV,
                          timeout=timeout)


def photos(folder: Path, n: int = 2, size: int = 48, seed: int = 0) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        p = folder / f"img{i:03d}.png"
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    return paths


def whole(path: Path) -> bool:
    try:
        with Image.open(path) as im:
            im.load()
        return True
    except Exception:  # noqa: BLE001 - any decoder error means a damaged file
        return False


def no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr, r.stderr


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- the cases ----------------------------------------------------------------------------------
def case_uncreatable_output(tmp: Path) -> str:
    photos(tmp / "in", 1)
    (tmp / "afile").write_text("a file, not a folder")
    r = cli(tmp / "in", "-o", tmp / "afile" / "sub", "--pipeline", "grayscale")
    no_traceback(r)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "-o: cannot create the folder" in r.stderr and "afile" in r.stderr, r.stderr
    return "exit 2, '-o: cannot create the folder ...'"


def case_output_is_a_file(tmp: Path) -> str:
    photos(tmp / "in", 1)
    (tmp / "out").write_text("x")
    r = cli(tmp / "in", "-o", tmp / "out", "--pipeline", "grayscale")
    no_traceback(r)
    assert r.returncode == 2 and "is not a directory" in r.stderr, r.stderr
    return "exit 2, '-o: ... exists and is not a directory'"


def case_output_path_taken_by_a_folder(tmp: Path) -> str:
    """One destination cannot be written (a folder has its name); the other file still is."""
    photos(tmp / "in", 2)
    (tmp / "out" / "img000.png").mkdir(parents=True)
    r = cli(tmp / "in", "-o", tmp / "out", "--pipeline", "grayscale")
    no_traceback(r)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "1 failed" in r.stderr and "img000.png" in r.stderr, r.stderr
    assert whole(tmp / "out" / "img001.png")
    assert not [p for p in (tmp / "out").iterdir() if ".tmp" in p.name]
    return "exit 1, that file reported, the other written, no temporary left"


def case_corrupt_inputs(tmp: Path) -> str:
    photos(tmp / "in", 1)
    (tmp / "in" / "zero.png").write_bytes(b"")
    (tmp / "in" / "noise.jpg").write_bytes(np.random.default_rng(1).bytes(4096))
    good = tmp / "in" / "img000.png"
    (tmp / "in" / "cut.png").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    r = cli(tmp / "in", "-o", tmp / "out", "--pipeline", "grayscale")
    no_traceback(r)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "3 failed" in r.stderr, r.stderr
    for name in ("zero.png", "noise.jpg", "cut.png"):
        assert name in r.stderr and not (tmp / "out" / name).exists()
    assert whole(tmp / "out" / "img000.png")
    return "exit 1, the 3 bad files reported by name, the good one written"


def case_empty_folder(tmp: Path) -> str:
    (tmp / "in").mkdir()
    r = cli(tmp / "in", "-o", tmp / "out", "--pipeline", "grayscale")
    no_traceback(r)
    assert r.returncode == 2 and "holds no image files" in r.stderr, r.stderr
    assert not (tmp / "out").exists()
    return "exit 2, 'IN: directory ... holds no image files', nothing created"


def case_missing_input(tmp: Path) -> str:
    r = cli(tmp / "nope.png", "-o", tmp / "out", "--pipeline", "grayscale")
    no_traceback(r)
    assert r.returncode == 2 and "is not a file" in r.stderr, r.stderr
    return "exit 2, 'IN: ... is not a file, directory or glob that matches'"


def case_animated_gif(tmp: Path) -> str:
    photos(tmp / "in", 1)
    rng = np.random.default_rng(2)
    frames = [Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8))
              for _ in range(2)]
    frames[0].save(tmp / "in" / "anim.gif", save_all=True, append_images=frames[1:])
    frames[0].save(tmp / "in" / "still.gif")
    r = cli(tmp / "in", "-o", tmp / "out", "--pipeline", "grayscale")
    no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert whole(tmp / "out" / "still.gif") and whole(tmp / "out" / "img000.png")
    with Image.open(tmp / "out" / "anim.gif") as im:
        assert im.n_frames == 2
    return "exit 0: every frame of the animated GIF processed into a GIF; the still GIF a GIF"


def case_stale_temp_files(tmp: Path) -> str:
    """What a killed run leaves (its pattern, its pid gone) is removed; a user's look-alike
    and a live process's temporary are not."""
    photos(tmp / "in", 1)
    out = tmp / "out"
    out.mkdir()
    stale = out / f".img000.png.{dead_pid()}-0123456789ab.tmp.png"
    stale.write_bytes(b"half")
    old_style = out / ".img000.png.0123456789ab.tmp.png"  # before the pid was in the name
    old_style.write_bytes(b"half")
    live = out / f".img000.png.{os.getpid()}-0123456789ab.tmp.png"
    live.write_bytes(b"in use")
    users = [out / ".img000.png.notmine.tmp.png", out / "img000.png.tmp", out / "notes.txt"]
    for u in users:
        u.write_text("user data")
    r = cli(tmp / "in", "-o", out, "--pipeline", "grayscale")
    no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert not stale.exists() and not old_style.exists()
    assert live.exists() and all(u.read_text() == "user data" for u in users)
    assert "removed 2 temporary file(s)" in r.stderr, r.stderr
    return "2 leftovers removed; a live run's temporary and 3 user files kept"


def case_sigkill_then_rerun(tmp: Path) -> str:
    """Kill -9 once some outputs exist: every output present is whole; a rerun completes
    and leaves no temporary file."""
    n = 60
    photos(tmp / "in", n, size=160)
    out = tmp / "out"
    cmd = [sys.executable, "-m", "wgcompute", "process", str(tmp / "in"), "-o", str(out),
           "--pipeline", PIPE, "--no-progress", "--threads", "2"]
    p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and p.poll() is None:
            if out.is_dir() and sum(1 for f in out.iterdir() if not f.name.startswith(".")) >= 3:
                break
            time.sleep(0.01)
        assert p.poll() is None, "the run finished before it could be killed (make it longer)"
        p.send_signal(signal.SIGKILL)
    finally:
        p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL
    done = [f for f in out.iterdir() if not f.name.startswith(".")]
    left = [f for f in out.iterdir() if f.name.startswith(".")]
    assert 0 < len(done) < n
    assert all(whole(f) for f in done), "a finished output is damaged"
    r = cli(tmp / "in", "-o", out, "--pipeline", PIPE, timeout=300)
    no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert sorted(f.name for f in out.iterdir()) == sorted(f"img{i:03d}.png" for i in range(n))
    assert all(whole(f) for f in out.iterdir())
    return (f"killed with {len(done)} of {n} written (all whole) and {len(left)} temporary "
            f"file(s); the rerun wrote all {n} and removed them")


CASES = {
    "output folder cannot be created (-o afile/sub)": case_uncreatable_output,
    "output is an existing file": case_output_is_a_file,
    "one output path taken by a folder (unwritable)": case_output_path_taken_by_a_folder,
    "corrupt inputs: empty, noise, truncated PNG": case_corrupt_inputs,
    "empty input folder": case_empty_folder,
    "missing input file": case_missing_input,
    "animated and single-frame GIFs": case_animated_gif,
    "temporary files left by a killed run": case_stale_temp_files,
    "SIGKILL mid-run, then the same command again": case_sigkill_then_rerun,
}


@pytest.mark.slow  # the command line end to end, killed and run again
@pytest.mark.parametrize("name", list(CASES))
def test_cli_fault(name, tmp_path):
    CASES[name](tmp_path)
