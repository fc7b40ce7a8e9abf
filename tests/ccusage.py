"""ccusage, the pinned oracle for `count --cost` (tests/test_cost.py, bench/ccusage.py).

    costs = session_costs(config)   # {session: dollars} for the projects under CLAUDE_CONFIG_DIR=config
    days = report(config, "daily", tz="Asia/Tokyo")["daily"]   # its JSON for any command, days in a time zone

ccusage names a session by its file's name (without .jsonl) and counts a response written in two
files once. Run as `ccusage claude session --json --offline --mode calculate`: its own embedded list
prices, no network. Installed once by npm_tools (the calling test skips when node or npm is missing).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from npm_tools import npm_tool

VERSION = "20.0.24"


def report(config: Path, command: str = "session", tz: str = "UTC") -> dict[str, Any]:
    """ccusage's JSON for `command` (session, daily) over the projects under CLAUDE_CONFIG_DIR=config,
    its days taken in time zone `tz`; subprocess.CalledProcessError when it fails."""
    script = npm_tool("ccusage", VERSION, "src/cli.js")
    env = {key: value for key, value in os.environ.items() if key in ("PATH", "HOME", "LANG", "TMPDIR")}
    proc = subprocess.run(
        [shutil.which("node") or "node", str(script), "claude", command, "--json", "--offline", "--mode", "calculate"],
        env=env | {"CLAUDE_CONFIG_DIR": str(config), "LOG_LEVEL": "0", "NO_COLOR": "1", "TZ": tz},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    found: dict[str, Any] = json.loads(proc.stdout)
    return found


def session_costs(config: Path) -> dict[str, float]:
    """ccusage's cost per session; subprocess.CalledProcessError when it fails."""
    return {session["sessionId"]: session["totalCost"] for session in report(config)["sessions"]}
