"""Run the real Codex CLI (pinned) against the Responses API stand-in, to check what it resumes.

    from codex_cli import resume
    from responses_server import ResponsesServer

    with ResponsesServer() as server:
        result = resume(rollout_bytes, "continue", server, tmp_path)
    result.body["input"]   # the items Codex sent: the history it rebuilt from the rollout, then the prompt

Codex 0.171.0 is installed once with npm into ~/.cache/ctxpipe-tests (tests/npm_tools.py): its npm
package `@openai/codex` publishes one version per platform (`0.171.0-linux-x64`...) carrying the
native binary (about 300 MB), which runs in place. The calling test is skipped, with the reason,
when node or npm is missing, the platform has no binary, or the install fails.

What a resume needs (found by running 0.171.0; each line below is why the harness does it):
- the rollout at CODEX_HOME/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl, the date
  and id from its `session_meta` line; `codex exec resume <id> PROMPT` finds it by scanning there.
- the same model provider as the rollout's `session_meta.model_provider`: Codex refuses to switch
  ("Cannot change this thread's model provider from `openai` to `standin` on resume"). "openai" is a
  built-in name a config cannot redefine, so for it the stand-in is the built-in provider's
  `openai_base_url` (with CODEX_API_KEY for the key); any other name gets a `[model_providers.X]`.
- the rollout's own model (its last `turn_context`): another one adds a `<model_switch>` developer
  message to the request.
- `--skip-git-repo-check` (the project folder is not a git repository).
- quiet: no update check, analytics or feedback, and the features that fetch plugins, apps and the
  model list switched off; the stand-in is also the HTTP(S) proxy (127.0.0.1 exempt), so anything
  that still aims at the internet is refused and recorded (`CodexResult.external`).
- Codex tries the Responses WebSocket first; the stand-in's 426 makes it use HTTP at once.

Every run gets a fresh HOME and CODEX_HOME and a minimal environment (nothing inherited that could
point Codex elsewhere: OPENAI_*, CODEX_*, proxies).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from messages_server import RecordedRequest
from npm_tools import npm_tool
from responses_server import ResponsesServer, item_text

CODEX_VERSION = "0.171.0"

# Kept from the caller's environment; everything else is dropped.
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")

# Features (`codex features list`) whose code reaches the network on start-up: the plugin marketplace
# (a git clone of github.com/openai/plugins, chatgpt.com), apps, tool suggestions, the model list.
_QUIET_FEATURES = (
    "plugins",
    "remote_plugin",
    "apps",
    "tool_suggest",
    "skill_mcp_dependency_install",
    "api_key_model_discovery",
    "in_app_updates",
    "unbounded_connection_retries",
)

needs_codex = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None or os.environ.get("CTXPIPE_SKIP_CODEX") == "1",
    reason="runs the real Codex CLI, installed with npm: needs node and npm on PATH (and CTXPIPE_SKIP_CODEX unset)",
)


def codex_binary() -> Path:
    """The pinned Codex binary for this platform, installed on first use; skips the calling test when that cannot be done."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    if arch is None or system is None:
        pytest.skip(f"Codex {CODEX_VERSION} ships no native binary these tests know for {sys.platform}/{platform.machine()}")
    triple = {"x64": "x86_64", "arm64": "aarch64"}[arch] + ("-unknown-linux-musl" if system == "linux" else "-apple-darwin")
    return npm_tool("@openai/codex", f"{CODEX_VERSION}-{system}-{arch}", f"vendor/{triple}/bin/codex")


@dataclass
class CodexResult:
    body: dict[str, Any]  # the turn's request: the resumed history, Codex's fresh context, the prompt
    requests: list[RecordedRequest]  # everything the run sent to the stand-in, in order
    returncode: int
    stdout: str
    stderr: str
    rollout_after: bytes  # the rollout after the run (Codex appends the new turn to it)
    workdir: Path  # where HOME, CODEX_HOME and the project are: resume there again to reuse Codex's state
    external: list[RecordedRequest] = field(default_factory=list)  # attempts to reach the internet, refused

    @property
    def input(self) -> list[dict[str, Any]]:
        return list(self.body.get("input") or [])

    @property
    def compactions(self) -> list[RecordedRequest]:
        """The requests in which Codex asked for a compaction (it found the context too big)."""
        return [r for r in self.requests if r.reply_kind == "compact"]

    def debug(self) -> str:
        lines = [f"exit {self.returncode}", f"stdout: {self.stdout[-2000:]}", f"stderr: {self.stderr[-3000:]}"]
        for r in self.requests:
            items = r.body.get("input") if isinstance(r.body, dict) else None
            lines.append(f"{r.method} {r.path} -> {r.status} ({r.reply_kind}) input items: {len(items) if isinstance(items, list) else '-'}")
        return "\n".join(lines)


def rollout_path(codex_home: Path, rollout: bytes) -> tuple[Path, str, dict[str, Any]]:
    """Where Codex looks for this rollout, its session id and its `session_meta` payload."""
    first = json.loads(rollout.split(b"\n", 1)[0])
    meta = first["payload"]
    stamp = str(meta.get("timestamp") or first["timestamp"])  # 2026-11-20T14:00:00.000Z
    day = stamp[:10].split("-")
    name = f"rollout-{stamp[:19].replace(':', '-')}-{meta['id']}.jsonl"
    return codex_home.joinpath("sessions", *day, name), str(meta["id"]), meta


def last_model(rollout: bytes, default: str = "gpt-5.5") -> str:
    model = default
    for line in rollout.splitlines():
        if b'"turn_context"' in line:
            payload = json.loads(line).get("payload") or {}
            model = payload.get("model") or model
    return model


def _config(server: ResponsesServer, provider: str, model: str) -> str:
    lines = [f'model = "{model}"', "check_for_update_on_startup = false"]
    base_url = f"{server.url}/v1"
    if provider == "openai":
        lines.append(f'openai_base_url = "{base_url}"')
    else:
        lines.append(f'model_provider = "{provider}"')
    lines += ["", "[analytics]", "enabled = false", "", "[feedback]", "enabled = false", "", "[features]"]
    lines += [f"{name} = false" for name in _QUIET_FEATURES]
    if provider != "openai":
        lines += ["", f"[model_providers.{provider}]", f'name = "{provider} (stand-in)"', f'base_url = "{base_url}"', 'wire_api = "responses"']
        lines += ['env_key = "CODEX_API_KEY"', "request_max_retries = 0", "stream_max_retries = 0"]
    return "\n".join(lines) + "\n"


def turn_request(requests: list[RecordedRequest], prompt: str) -> RecordedRequest | None:
    """The turn's request among the run's: the last answered `POST /v1/responses` whose input ends with the prompt."""
    turns = [r for r in requests if r.method == "POST" and r.path == "/v1/responses" and isinstance(r.body, dict) and r.reply_kind != "compact"]
    with_prompt = [r for r in turns if isinstance(r.body.get("input"), list) and r.body["input"] and item_text(r.body["input"][-1]) == prompt]
    return (with_prompt or turns or [None])[-1]


def resume(
    rollout: bytes,
    prompt: str,
    server: ResponsesServer,
    workdir: Path,
    *,
    timeout: float = 120,
    args: tuple[str, ...] = (),
    expect_request: bool = True,
) -> CodexResult:
    """Run `codex exec resume <id> PROMPT` on the given rollout against `server`, in `workdir`.

    `workdir` gets the HOME, CODEX_HOME and project folders (a test's tmp_path). `args` go before the
    session id. Fails the test (with the run's output and requests) when Codex sent no turn
    request, unless `expect_request` is False.
    """
    binary = codex_binary()
    home, codex_home, project = workdir / "home", workdir / "codex-home", workdir / "project"
    for folder in (home, codex_home, project):
        folder.mkdir(parents=True, exist_ok=True)
    path, session_id, meta = rollout_path(codex_home, rollout)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(rollout)
    (codex_home / "config.toml").write_text(_config(server, str(meta.get("model_provider") or "openai"), last_model(rollout)))

    env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
    env.update(
        HOME=str(home),
        CODEX_HOME=str(codex_home),
        CODEX_API_KEY="test-key",
        HTTP_PROXY=server.url,
        HTTPS_PROXY=server.url,
        ALL_PROXY=server.url,
        NO_PROXY="127.0.0.1,localhost",
        NO_COLOR="1",
        TERM="dumb",
    )
    before = len(server.requests)
    proc = subprocess.run(
        [str(binary), "exec", "--skip-git-repo-check", "--color", "never", "resume", *args, session_id, prompt],
        cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
    )  # fmt: skip
    requests = server.requests[before:]
    result = CodexResult(
        body={},
        requests=requests,
        returncode=proc.returncode,
        stdout=proc.stdout.decode(errors="replace"),
        stderr=proc.stderr.decode(errors="replace"),
        rollout_after=path.read_bytes() if path.exists() else b"",
        workdir=workdir,
        external=[r for r in requests if r.reply_kind == "external"],
    )
    turn = turn_request(requests, prompt)
    if turn is None and expect_request:
        pytest.fail(f"Codex sent no /v1/responses turn request\n{result.debug()}")
    result.body = turn.body if turn is not None else {}
    return result
