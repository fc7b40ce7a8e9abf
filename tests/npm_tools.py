"""Real tools from the npm registry as test oracles, pinned, installed once into a cache folder.

    cli = npm_tool("ccusage", "20.0.24", "src/cli.js")   # the package's entry script; run it with node

Each version is installed with npm into CTXPIPE_NPM_TOOLS_DIR (default ~/.cache/ctxpipe-tests)/
<name>-<version> on first use and reused after. The calling test is skipped, with the reason, when
node or npm is missing or the install fails (once per test session, not once per test); parallel test
workers install once, the others wait on a lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

INSTALL_TIMEOUT = 600  # a cold npm cache on a slow link; a warm one takes seconds

_failures: dict[str, str] = {}


def tool_dir(name: str, version: str) -> Path:
    base = Path(os.environ.get("CTXPIPE_NPM_TOOLS_DIR") or Path.home() / ".cache" / "ctxpipe-tests")
    return base / f"{name.replace('/', '-').lstrip('@')}-{version}"


def _installed(folder: Path, name: str, version: str, entry: str) -> Path | None:
    package = folder / "node_modules" / name
    try:
        found = json.loads((package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    script = package / entry
    return script if found == version and script.is_file() else None


def npm_tool(name: str, version: str, entry: str, folder: Path | None = None) -> Path:
    """The pinned package's `entry` file, installed on first use; skips the calling test when it cannot be."""
    if shutil.which("node") is None or (npm := shutil.which("npm")) is None:
        pytest.skip(f"{name} {version} runs on Node.js: these tests need node and npm on PATH (Node.js 18 or newer)")
    key = f"{name}@{version}"
    if key in _failures:
        pytest.skip(_failures[key])
    folder = folder or tool_dir(name, version)
    if (script := _installed(folder, name, version, entry)) is not None:
        return script
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (script := _installed(folder, name, version, entry)) is not None:
            return script
        try:
            proc = subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(folder),
                    "--no-audit",
                    "--no-fund",
                    "--ignore-scripts",
                    "--save-exact",
                    "--loglevel=error",
                    f"{name}@{version}",
                ],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _failures[key] = f"could not install {name} {version} with npm into {folder}: {exc}"
            pytest.skip(_failures[key])
        if (script := _installed(folder, name, version, entry)) is None:
            errors = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip() and not line.startswith("npm error   ")]
            _failures[key] = f"npm install of {name} {version} into {folder} failed (exit {proc.returncode}): " + " | ".join(errors[:3])
            pytest.skip(_failures[key])
        return script
