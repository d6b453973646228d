"""6. Start-up: ``fxpasses list`` against ``python -c "import torch"`` (fresh subprocesses)."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

from common import Config, Result, Target, fmt_s, md_table


def _fxpasses_cmd() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "fxpasses")
    if os.path.exists(exe):
        return [exe]
    found = shutil.which("fxpasses")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from fxpasses.cli import main; sys.exit(main())"]


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def run(cfg: Config) -> Result:
    res = Result("startup", "6. Start-up")
    cmds = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import torch"': [sys.executable, "-c", "import torch"],
        "import torch, GC paused": [sys.executable, "-c", "import gc; gc.disable(); import torch"],
        'python -c "import fxpasses"': [sys.executable, "-c", "import fxpasses"],
        "fxpasses list": _fxpasses_cmd() + ["list"],
    }
    n = 3 if cfg.quick else 9
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for cmd in cmds.values():  # warm the file cache once
        _wall(cmd)
    for _ in range(n):  # interleaved, so that load changes hit all alike
        for k, cmd in cmds.items():
            times[k].append(_wall(cmd))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med['python -c "import torch"']
    rows = [
        [k, fmt_s(med[k]), f"{fmt_s(min(v))}-{fmt_s(max(v))}", f"{(med[k] - base) * 1e3:+.0f} ms", f"{med[k] / base:.2f}x"]
        for k, v in times.items()
    ]
    res.add(
        f"Wall time of fresh subprocesses, median of {n} (interleaved, after one warm-up run each). "
        "The `fxpasses` console script pauses the cyclic garbage collector while it imports "
        "torch and the plugins, then freezes what they loaded out of later collections; the "
        "*GC paused* row imports torch the same way, for the overhead at equal footing."
    )
    res.add(md_table(["command", "median", "range", "vs import torch", "ratio"], rows))
    over = med["fxpasses list"] - base
    res.targets.append(Target("`fxpasses list` - `import torch` (s)", over, "<= 0.3 s", over <= 0.3))
    fair = med["fxpasses list"] - med["import torch, GC paused"]
    res.targets.append(
        Target("`fxpasses list` - `import torch` with the GC paused alike (s)", fair, "<= 0.3 s", fair <= 0.3)
    )
    return res
