"""Run the real Claude Code CLI (pinned versions) against the fake Messages API, to check what it resumes.

    from claude_code import resume
    from messages_server import MessagesServer

    with MessagesServer() as server:
        result = resume(session_bytes, session_id, cwd=project_dir, prompt="go on", server=server)
    result.body["messages"]   # the conversation Claude Code sent: what it loaded from the transcript

Two versions (`version=`): 2.1.88, the seed's (the default; JavaScript, run with Node.js), and 2.1.332,
today's (its npm package carries a native binary per platform, in @anthropic-ai/claude-code-<os>-<arch>,
run in place). Each is installed once with npm into a cache folder (~/.cache/ctxpipe-tests/
claude-code-<version>; CTXPIPE_CLAUDE_CODE_DIR moves 2.1.88's) and reused; the first install downloads
about 100 MB (2.1.88) or 230 MB (2.1.332) from the npm registry. The calling test is skipped (with the
reason) when node or npm is missing, the platform has no binary, or the install fails.

2.1.88 runs on a pinned Node.js 22 from the npm registry (`node-<os>-<arch>`, the official binary
repackaged; about 125 MB, installed the same way) with its compile cache in the cache folder: node 20
compiles the 13 MB cli.js again at every resume (0.35 of its 1.3-1.5 CPU seconds), node 22 once (a resume
then takes 0.8-0.9). Where that package cannot be installed, the node on PATH runs it, as before.

Every run gets a fresh HOME, a minimal environment (nothing inherited that could point Claude Code
elsewhere: ANTHROPIC_*, CLAUDE_*, proxies), and the switches 2.1.88 honours to stay quiet
(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC covers telemetry, auto-update, release notes, model
capabilities...). As a safety net the fake server is also its HTTP(S) proxy, with 127.0.0.1
exempt: whatever still aims at the internet lands on the fake, is refused and is recorded
(`ResumeResult.external`) instead of leaving the machine.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from messages_server import MessagesServer, RecordedRequest
from npm_tools import npm_tool

CLAUDE_CODE_VERSION = "2.1.88"  # the seed's version: its npm package is JavaScript, run with node
# The Node.js that runs it when it can be installed (see the module's docstring): 22 has a compile cache.
NODE_VERSION = "22.23.5"
# Today's: its npm package carries a native binary per platform. CTXPIPE_CLAUDE_CODE_CURRENT=2.1.400
# runs the resume tests and the catalog check against a newer release instead (README, Development).
CURRENT_CLAUDE_CODE_VERSION = os.environ.get("CTXPIPE_CLAUDE_CODE_CURRENT") or "2.1.332"
# The versions the resume tests hold ctxpipe's output to (the README names them).
CLAUDE_CODE_VERSIONS = (CLAUDE_CODE_VERSION, CURRENT_CLAUDE_CODE_VERSION)

# What 2.1.88 reads (grepped from its cli.js): the first one switches off all nonessential traffic
# (telemetry, error reporting, auto-update checks, release notes, grove, model capabilities); the
# others are the narrower switches, set too in case a code path checks only its own.
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_INSTALLATION_CHECKS": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1",
}

# Kept from the caller's environment; everything else is dropped (a test run inside Claude Code
# has CLAUDECODE, CLAUDE_CODE_ENTRYPOINT, ANTHROPIC_* ... that would change what the child does).
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT")


# The mark of every test that runs Claude Code (a test needing one version also skips when it cannot install it).
needs_claude_code = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None or os.environ.get("CTXPIPE_SKIP_CLAUDE_CODE") == "1",
    reason="runs the real Claude Code CLI: needs node and npm on PATH (and CTXPIPE_SKIP_CLAUDE_CODE unset)",
)


def cache_dir(version: str = CLAUDE_CODE_VERSION) -> Path:
    default = Path.home() / ".cache" / "ctxpipe-tests" / f"claude-code-{version}"
    return Path(os.environ.get("CTXPIPE_CLAUDE_CODE_DIR") or default) if version == CLAUDE_CODE_VERSION else default


def claude_code_cli() -> Path:
    """The pinned Claude Code's cli.js, installed on first use; skips the calling test when that cannot be done."""
    return npm_tool("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "cli.js", cache_dir())


def native_package() -> str:
    """The npm package holding this platform's Claude Code binary (the wrapper's postinstall copies it; we run it in place)."""
    found = _platform()
    if found is None:
        pytest.skip(f"Claude Code {CURRENT_CLAUDE_CODE_VERSION} ships no native binary these tests know for {sys.platform}/{platform.machine()}")
    return f"@anthropic-ai/claude-code-{found[0]}-{found[1]}"


def _platform() -> tuple[str, str] | None:
    """(os, arch) as npm's per-platform packages name them, or None for a platform they do not cover."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    return (system, arch) if arch and system else None


@functools.cache
def node_runtime() -> tuple[str, dict[str, str]]:
    """The node that runs 2.1.88 and the environment it needs: the pinned Node.js 22 with its compile
    cache beside it, or the node on PATH (no cache) where the pinned one cannot be installed."""
    found = _platform()
    if found is not None:
        try:
            node = npm_tool(f"node-{found[0]}-{found[1]}", NODE_VERSION, "bin/node")
        except pytest.skip.Exception:
            pass  # npm_tool remembers the failure: the other tests fall back without trying again
        else:
            return str(node), {"NODE_COMPILE_CACHE": str(node.parent.parent / "compile-cache")}
    return shutil.which("node") or "node", {}


def claude_code_command(version: str = CLAUDE_CODE_VERSION) -> list[str]:
    """The argv that runs Claude Code `version`, installed on first use; skips the calling test when that cannot be done."""
    if version == CLAUDE_CODE_VERSION:
        return [node_runtime()[0], str(claude_code_cli())]
    if version == CURRENT_CLAUDE_CODE_VERSION:
        return [str(npm_tool(native_package(), version, "claude", cache_dir(version)))]
    raise ValueError(f"no harness for Claude Code {version}")


def project_dir_name(cwd: str | os.PathLike[str]) -> str:
    """The folder under ~/.claude/projects where Claude Code keeps the sessions of `cwd`.

    Every character that is not an ASCII letter or digit becomes "-" (so "/" and "." do); names
    longer than 200 characters get a hash suffix in Claude Code, which this does not reproduce.
    """
    name = re.sub(r"[^a-zA-Z0-9]", "-", os.path.realpath(cwd))
    if len(name) > 200:
        raise ValueError(f"cwd too long for the simple project-folder encoding: {cwd}")
    return name


@dataclass
class ResumeResult:
    body: dict[str, Any]  # the main conversation request: what Claude Code resumed, plus the new prompt
    requests: list[RecordedRequest]  # everything the run sent to the fake, in order
    returncode: int
    stdout: str
    stderr: str
    session_after: bytes  # the session file after the run (Claude Code appends the new turn)
    home: Path | None  # the HOME used, when the caller provided it (a temporary one is removed)
    external: list[RecordedRequest] = field(default_factory=list)  # attempts to reach the internet, refused

    def debug(self) -> str:
        lines = [f"exit {self.returncode}", f"stdout: {self.stdout[-2000:]}", f"stderr: {self.stderr[-2000:]}"]
        lines += [
            f"{r.method} {r.path} -> {r.status} ({r.reply_kind}) model={(r.body or {}).get('model') if isinstance(r.body, dict) else None}"
            for r in self.requests
        ]
        return "\n".join(lines)


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def main_request(requests: list[RecordedRequest], prompt: str) -> RecordedRequest | None:
    """The conversation request among side calls (title, topic, quota checks...): the largest one
    whose last message carries the prompt, or failing that the largest of all."""
    calls = [r for r in requests if r.is_messages and isinstance(r.body, dict) and isinstance(r.body.get("messages"), list) and r.body["messages"]]
    with_prompt = [r for r in calls if prompt in _text_of(r.body["messages"][-1])]
    pool = with_prompt or calls
    return max(pool, key=lambda r: (len(r.body["messages"]), len(json.dumps(r.body))), default=None)


def resume(
    session_jsonl: bytes,
    session_id: str,
    cwd: str | os.PathLike[str],
    prompt: str,
    server: MessagesServer,
    *,
    home: str | os.PathLike[str] | None = None,
    timeout: float = 120,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    version: str = CLAUDE_CODE_VERSION,
    expect_request: bool = True,
) -> ResumeResult:
    """Run `claude -p --resume SESSION_ID PROMPT` in `cwd` on the given transcript, against `server`.

    `cwd` is created if missing and should be what the transcript's `cwd` fields say. `home` keeps
    the HOME (to look at what Claude Code wrote); by default a temporary one is used and removed.
    `args` go before the prompt, `env` is added last. Fails the test (with the run's output and
    requests) when Claude Code sent no conversation request, unless `expect_request` is False.
    """
    command = claude_code_command(version)
    cwd = Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    own_home = home is None
    home_path = Path(tempfile.mkdtemp(prefix="ctxpipe-claude-home-")) if own_home else Path(home)
    try:
        sessions = home_path / ".claude" / "projects" / project_dir_name(cwd)
        sessions.mkdir(parents=True, exist_ok=True)
        session_path = sessions / f"{session_id}.jsonl"
        session_path.write_bytes(session_jsonl)

        child_env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        child_env.update(QUIET_ENV)
        if version == CLAUDE_CODE_VERSION:
            child_env.update(node_runtime()[1])
        child_env.update(
            HOME=str(home_path),
            ANTHROPIC_BASE_URL=server.url,
            ANTHROPIC_API_KEY="test-key",
            HTTPS_PROXY=server.url,
            HTTP_PROXY=server.url,
            NO_PROXY="127.0.0.1,localhost",
            TERM="dumb",
            NO_COLOR="1",
        )
        child_env.update(env or {})
        before = len(server.requests)
        proc = subprocess.run(
            [*command, "-p", "--resume", session_id, *args, prompt],
            cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
        )  # fmt: skip
        requests = server.requests[before:]
        session_after = session_path.read_bytes() if session_path.exists() else b""
    finally:
        if own_home:
            shutil.rmtree(home_path, ignore_errors=True)
    result = ResumeResult(
        body={},
        requests=requests,
        returncode=proc.returncode,
        stdout=proc.stdout.decode(errors="replace"),
        stderr=proc.stderr.decode(errors="replace"),
        session_after=session_after,
        home=None if own_home else home_path,
        external=[r for r in requests if r.reply_kind == "external"],
    )
    main = main_request(requests, prompt)
    if main is None and not expect_request:
        return result
    if main is None:
        pytest.fail(f"Claude Code sent no /v1/messages conversation request\n{result.debug()}")
    result.body = main.body
    return result
