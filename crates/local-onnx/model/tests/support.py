"""What the model tool's tests share: where the cache is, and running the tool as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MODEL_DIR = Path(__file__).resolve().parents[1]
TOOL = MODEL_DIR / "ripcord_model.py"
# The cache `cargo xtask setup-model` fills: `$RIPCORD_CACHE`, else `$XDG_CACHE_HOME/ripcord`,
# else `~/.cache/ripcord` (as `ripcord_local_onnx::default_cache_dir` decides).
def _cache() -> Path:
    if os.environ.get("RIPCORD_CACHE"):
        return Path(os.environ["RIPCORD_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "ripcord"
    return Path.home() / ".cache" / "ripcord"


CACHE = _cache()
GGUF = CACHE / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_DIR = "tiny-llama"

# The tests import the package the way the entry point does.
sys.path.insert(0, str(MODEL_DIR))


def run_tool(*args: str, ok: bool = True):
    """Runs `ripcord_model.py ARGS`; returns its JSON report, or (with ok=False) the failure's text."""
    done = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=600)
    if ok:
        if done.returncode != 0:
            raise AssertionError(f"`{' '.join(args)}` failed ({done.returncode}): {done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    if done.returncode == 0:
        raise AssertionError(f"`{' '.join(args)}` succeeded but should have failed: {done.stdout[-2000:]}")
    return done.stderr
