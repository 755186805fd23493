"""The sandbox PR code runs in (bot/sandbox.py), with the real bubblewrap.

Hostile code (a script, a crate's build.rs, a conftest.py) tries what a runner must never allow:
read a file of the runner, read the runner's environment through /proc, reach the network, and
leave a process behind that writes later. Each attempt prints what it got; the tests check that
nothing got through and that the port's verdict says why. Where this machine cannot make the
namespaces, the tests fail and say so (issue 21: they must not skip silently).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from checkout_support import torch_python

from bot import sandbox

ROOT = Path(__file__).resolve().parent.parent

# What the hostile code runs, in Python (the conftest and the script) and in Rust (build.rs).
PROBE_PY = r"""
import os, socket, subprocess
def _sandbox_probe(secret_file, planted, port, marker):
    found = []
    try:
        found.append("file: read " + open(secret_file).read())
    except OSError as exc:
        found.append(f"file: {exc.strerror}")
    leaked = []
    for pid in os.listdir("/proc"):
        try:
            if planted.encode() in open(f"/proc/{pid}/environ", "rb").read():
                leaked.append(pid)
        except OSError:
            pass
    found.append(f"environ: {'LEAKED from ' + ','.join(leaked) if leaked else 'not found in any /proc/*/environ'}")
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        found.append("net: connected")
    except OSError as exc:
        found.append(f"net: {exc.strerror or exc}")
    subprocess.Popen(["sh", "-c", f"sleep 30; echo late > {marker}"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found.append("background: started")
    return "; ".join(found)
"""

BUILD_RS = r"""
use std::io::Read;
fn main() {
    let mut found = Vec::new();
    match std::fs::read_to_string("@SECRET@") {
        Ok(text) => found.push(format!("file: read {text}")),
        Err(e) => found.push(format!("file: {e}")),
    }
    let mut leaked = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let mut bytes = Vec::new();
            if let Ok(mut f) = std::fs::File::open(entry.path().join("environ")) {
                let _ = f.read_to_end(&mut bytes);
                if String::from_utf8_lossy(&bytes).contains("@PLANTED@") {
                    leaked.push(entry.file_name().to_string_lossy().to_string());
                }
            }
        }
    }
    found.push(if leaked.is_empty() { "environ: not found in any /proc/*/environ".to_string() }
               else { format!("environ: LEAKED from {}", leaked.join(",")) });
    match std::net::TcpStream::connect("127.0.0.1:@PORT@") {
        Ok(_) => found.push("net: connected".to_string()),
        Err(e) => found.push(format!("net: {e}")),
    }
    // detached from cargo's pipes, so cargo does not wait for it: it would write after the build
    let _ = std::process::Command::new("sh").arg("-c").arg("sleep 30; echo late > @MARKER@")
        .stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null()).spawn();
    found.push("background: started".to_string());
    panic!("sandbox probe: {}", found.join("; "));
}
"""


class Listener:
    """A TCP server on the runner's loopback: a connection from the sandbox would show here."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture()
def runner(tmp_path):
    """A runner's secrets: a file outside the checkout, a variable with an innocent name, a port."""
    secret = tmp_path / "runner" / "credentials"
    secret.parent.mkdir()
    secret.write_text("runner-file-" + secrets.token_hex(8))
    planted = "planted-" + secrets.token_hex(8)
    listener = Listener()
    yield {"secret": secret, "planted": planted, "listener": listener}
    listener.close()


def _require_sandbox(tmp_path: Path) -> None:
    try:
        sandbox.make([tmp_path], [])
    except sandbox.SandboxUnavailable as exc:
        pytest.fail(f"this machine cannot make the sandbox, so PR code could not be run safely here: {exc}")


def _assert_nothing_got_through(text: str, runner: dict, marker: Path) -> None:
    assert runner["secret"].read_text() not in text
    assert "file: No such file or directory" in text or "file: No such file" in text, text
    assert runner["planted"] not in text
    assert "environ: not found in any /proc/*/environ" in text, text
    assert "net: connected" not in text and "net: " in text, text  # refused: the loopback is its own
    assert _still_running(marker) == [], "a process the PR's code started outlived the sandbox"
    assert not marker.exists()
    assert runner["listener"].accepted == 0


def _still_running(marker: Path) -> list[int]:
    """The processes on this machine whose command line names ``marker``: the background process
    the probe started (it sleeps, then writes ``marker``). They are killed, so none is left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(marker).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return found


def test_a_script_in_the_sandbox_reads_no_runner_file_environment_or_network_and_leaves_nothing(
    tmp_path, runner
):
    _require_sandbox(tmp_path)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    marker = checkout / "late"
    hostile = checkout / "hostile.py"
    hostile.write_text(
        PROBE_PY + f"print(_sandbox_probe({str(runner['secret'])!r}, {runner['planted']!r}, "
        f"{runner['listener'].port}, {str(marker)!r}))\n"
    )
    # agent-d's process, started with the planted variable in its environment (as a runner's job
    # is), runs the hostile script the way the port runs PR code
    driver = textwrap.dedent(f"""
        import subprocess, sys
        from pathlib import Path
        from bot import sandbox
        box = sandbox.make([Path({str(checkout)!r})], [])
        with sandbox.active(box):
            argv = sandbox.wrap([sys.executable, {str(hostile)!r}], Path({str(checkout)!r}))
        print(subprocess.run(argv, capture_output=True, text=True).stdout)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), KUBECONFIG=runner["planted"])
    out = subprocess.run([sys.executable, "-c", driver], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "background: started" in out.stdout, out.stdout + out.stderr
    _assert_nothing_got_through(out.stdout, runner, marker)


def test_only_the_allow_listed_environment_and_paths_are_inside(tmp_path):
    _require_sandbox(tmp_path)
    checkout, out_dir = tmp_path / "checkout", tmp_path / "checkout" / "cutile_kernel_out"
    out_dir.mkdir(parents=True)
    (out_dir / "report.md").write_text("agent-d's own")
    box = sandbox.make([checkout], [out_dir])
    code = (
        "import json, os; print(json.dumps({'env': sorted(os.environ), "
        "'out': os.listdir(" + repr(str(out_dir)) + "), "
        "'home': os.environ['HOME'], 'cwd': os.getcwd()}))"
    )
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "GH_PAT": "ghp_x",
           "MY_SERVICE_URL": "https://internal", "CUDA_VISIBLE_DEVICES": "0"}  # fmt: skip
    with sandbox.active(box):
        argv = sandbox.wrap([sys.executable, "-c", code], checkout, env)
    seen = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    assert "GH_PAT" not in seen["env"] and "MY_SERVICE_URL" not in seen["env"]
    assert "CUDA_VISIBLE_DEVICES" in seen["env"]
    assert seen["out"] == []  # agent-d's out folder is empty inside, though the checkout holds it
    assert seen["home"] == sandbox.SANDBOX_HOME and seen["cwd"] == str(checkout.resolve())
    assert (out_dir / "report.md").read_text() == "agent-d's own"


def test_without_an_active_sandbox_wrap_changes_nothing(tmp_path):
    argv = [sys.executable, "-c", "pass"]
    assert sandbox.wrap(argv, tmp_path) == argv


def test_a_machine_without_bubblewrap_is_told_what_to_change(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name, path=None: None)
    with pytest.raises(sandbox.SandboxUnavailable, match="install bubblewrap"):
        sandbox.make([tmp_path], [])


def test_bwrap_that_cannot_make_namespaces_says_why(tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    box = sandbox.Sandbox(str(fake), (tmp_path,))
    with pytest.raises(
        sandbox.SandboxUnavailable, match="No permissions to create new namespace.*--no-sandbox"
    ):
        box.check()


# ------------------------------------------------------------------------------ through the port


def _planted_port(repo: Path, cargo_target: Path, out: Path, runner: dict) -> subprocess.CompletedProcess:
    """``agent-d port --sandbox`` in a process whose environment holds the planted variable."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), KUBECONFIG=runner["planted"])
    argv = [sys.executable, "-m", "bot.cli", "port", "--repo", str(repo), "--kernel", "silu_and_mul",
            "--cargo-target-dir", str(cargo_target), "--out", str(out), "--sandbox", "--json",
            "--python", torch_python()]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1500)


def _demo(tmp_path: Path, wheel: Path) -> Path:
    """A TileGym checkout whose change adds silu_and_mul's kernel.rs, once the sandbox is there."""
    from bot.demo import assemble_checkout

    _require_sandbox(tmp_path)
    return assemble_checkout(tmp_path / "tilegym", wheel, ["silu_and_mul"], ["silu_and_mul"]).repo


def _everything_written(out: Path, proc: subprocess.CompletedProcess) -> str:
    texts = [proc.stdout, proc.stderr]
    texts += [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()]
    return "\n".join(texts)


@pytest.mark.slow
def test_a_build_script_in_the_sandbox_gets_nothing_and_the_verdict_says_why(
    tmp_path, tilegym_wheel, cargo_target_dir, runner
):
    repo = _demo(tmp_path, tilegym_wheel)
    marker = repo / "late-from-build-rs"
    crate = repo / "src/tilegym/ops/cutile_rs/cutile_kernels"
    build_rs = BUILD_RS.replace("@SECRET@", str(runner["secret"])).replace("@PLANTED@", runner["planted"])
    build_rs = build_rs.replace("@PORT@", str(runner["listener"].port)).replace("@MARKER@", str(marker))
    (crate / "build.rs").write_text(build_rs)
    out = tmp_path / "out"
    proc = _planted_port(repo, cargo_target_dir, out, runner)
    reason = json.loads(proc.stdout)[0]["reason"]
    assert "sandbox probe" in reason, proc.stdout + proc.stderr
    _assert_nothing_got_through(reason, runner, marker)
    assert runner["secret"].read_text() not in _everything_written(out, proc)


@pytest.mark.slow
def test_a_conftest_in_the_sandbox_gets_nothing_and_the_log_says_why(
    tmp_path, tilegym_wheel, cargo_target_dir, runner
):
    repo = _demo(tmp_path, tilegym_wheel)
    marker = repo / "late-from-conftest"
    conftest = repo / "tests" / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + "\n"
        + PROBE_PY
        + "def pytest_report_header(config):\n"  # printed at the top of the log
        + f"    return 'CONFTEST ' + _sandbox_probe({str(runner['secret'])!r}, {runner['planted']!r}, "
        f"{runner['listener'].port}, {str(marker)!r})\n"
    )
    out = tmp_path / "out"
    proc = _planted_port(repo, cargo_target_dir, out, runner)
    log = (out / "silu_and_mul" / "correctness_cutile_rs.txt").read_text()
    probe = next(line for line in log.splitlines() if line.startswith("CONFTEST"))
    _assert_nothing_got_through(probe, runner, marker)
    assert runner["secret"].read_text() not in _everything_written(out, proc)
    assert json.loads(proc.stdout)[0]["verdict"] == "BLOCKED"  # no GPU here, said so


@pytest.mark.slow
def test_a_runner_that_cannot_make_the_sandbox_runs_no_pr_code_and_says_what_to_change(
    tmp_path, tilegym_wheel, cargo_target_dir, monkeypatch
):
    """port-job's default on a runner whose kernel or container refuses the namespaces: every kernel
    BLOCKED (env) with bwrap's own words and the change to make, before the build (PR code) runs."""
    from bot.demo import assemble_checkout

    repo = assemble_checkout(tmp_path / "tilegym", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]).repo
    refusing = tmp_path / "bin"
    refusing.mkdir()
    (refusing / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    (refusing / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{refusing}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "bot.cli", "port", "--repo", str(repo), "--kernel", "silu_and_mul",
            "--cargo-target-dir", str(cargo_target_dir), "--out", str(out), "--sandbox", "--json"]  # fmt: skip
    proc = subprocess.run(argv, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    [kernel] = json.loads(proc.stdout)
    assert (kernel["verdict"], kernel["class"]) == ("BLOCKED", "env"), kernel
    assert "PR code is run only in a sandbox" in kernel["reason"]
    assert "setting up uid map: Permission denied" in kernel["reason"] and "--no-sandbox" in kernel["reason"]
    assert not any(s["name"] == "build" for s in kernel["stages"]), kernel["stages"]  # nothing of the PR ran
    assert (out / "silu_and_mul" / "reports" / "correctness.md").is_file()  # the reports are still written


def _readable_tree(box, checkout: Path, env: dict[str, str], root: Path) -> dict[str, str]:
    """Every file under ``root`` that PR code in ``box`` sees, with what it reads there."""
    code = (
        "import json, os, sys; root = sys.argv[1]; seen = {}\n"
        "for d, _dirs, files in os.walk(root):\n"
        "    for f in files:\n"
        "        p = os.path.join(d, f)\n"
        "        try: seen[os.path.relpath(p, root)] = open(p).read()\n"
        "        except OSError as exc: seen[os.path.relpath(p, root)] = 'unreadable: ' + exc.strerror\n"
        "print(json.dumps(seen))"
    )
    with sandbox.active(box):
        argv = sandbox.wrap([sys.executable, "-c", code, str(root)], checkout, env)
    return json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)


def test_pr_code_reads_of_cargo_home_only_its_binaries_and_sources(tmp_path):
    _require_sandbox(tmp_path)
    checkout, cargo = tmp_path / "checkout", tmp_path / "cargo"
    checkout.mkdir()
    files = {
        "bin/cargo-tool": "a binary",
        "registry/src/index.crates.io-1/cutile-0.2.0/src/lib.rs": "// source",
        "registry/cache/index.crates.io-1/cutile-0.2.0.crate": "archive",
        "git/checkouts/dep/abc/lib.rs": "// git source",
        "credentials.toml": '[registry]\ntoken = "cio_secret"\n',
        "credentials": 'token = "cio_old_secret"\n',
        "config.toml": "[http]\nproxy = 'http://user:pass@proxy'\n",
    }
    for rel, text in files.items():
        (cargo / rel).parent.mkdir(parents=True, exist_ok=True)
        (cargo / rel).write_text(text)
    box = sandbox.make([checkout], [])
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "CARGO_HOME": str(cargo)}
    seen = _readable_tree(box, checkout, env, cargo)
    assert sorted(seen) == sorted(r for r in files if r.startswith(("bin/", "registry/", "git/")))
    assert seen["registry/src/index.crates.io-1/cutile-0.2.0/src/lib.rs"] == "// source"
    # a PATH entry naming CARGO_HOME itself binds it whole: its secrets are /dev/null inside, which
    # a sandbox mounted nodev cannot even open
    wide = dict(env, PATH=f"{cargo}{os.pathsep}{os.environ['PATH']}")
    seen = _readable_tree(box, checkout, wide, cargo)
    assert {seen[name] for name in ("credentials.toml", "credentials", "config.toml")} <= {
        "",
        "unreadable: Permission denied",
    }
    assert "secret" not in json.dumps(seen) and "pass@" not in json.dumps(seen)


def _mounts_inside(box, checkout: Path, env: dict[str, str]) -> list[str]:
    """The mount points PR code in ``box`` has: every path it can read is under one of them."""
    code = "print('\\n'.join(line.split()[4] for line in open('/proc/self/mountinfo')))"
    with sandbox.active(box):
        argv = sandbox.wrap([sys.executable, "-c", code], checkout, env)
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()


def test_what_pr_code_can_read_is_the_system_the_toolchains_and_the_checkout_without_secrets(
    tmp_path, monkeypatch
):
    """A runner whose PATH names two wide folders: a home holding keys and logins, and the runner's
    own folder with its registration and the step scripts Actions writes out (secrets expanded in
    them). Every mount inside is listed and accounted for; none of those files is readable."""
    _require_sandbox(tmp_path)
    checkout, target = tmp_path / "checkout", tmp_path / "target"
    home, runner = tmp_path / "runner-home", tmp_path / "actions-runner"
    secret_files = {
        home / ".ssh" / "id_ed25519": "PRIVATE KEY",
        home / ".docker" / "config.json": '{"auths": {"ghcr.io": "c2VjcmV0"}}',
        home / ".netrc": "machine github.com password ghp_secret",
        home / ".config" / "gh" / "hosts.yml": "oauth_token: gho_secret",
        runner / ".credentials": '{"scheme": "OAuth"}',
        runner / ".credentials_rsaparams": "rsa secret",
        runner / ".runner": '{"agentId": 1}',
        runner / "_work" / "_temp" / "step.sh": "curl -H 'Authorization: token ghs_secret'",
    }
    for path, text in secret_files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (home / "bin").mkdir()
    (runner / "bin").mkdir()
    for folder in (checkout, target):
        folder.mkdir()
    monkeypatch.setenv("RUNNER_TEMP", str(runner / "_work" / "_temp"))
    box = sandbox.make([checkout, target], [])
    path = os.pathsep.join([str(home), str(runner), os.environ["PATH"]])  # two wide entries
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/root")}
    mounts = _mounts_inside(box, checkout, env)
    hidden = {str(p) for p in (home / ".ssh", home / ".docker", home / ".netrc", home / ".config",
                               runner / ".credentials", runner / ".credentials_rsaparams", runner / ".runner",
                               runner / "_work" / "_temp")}  # fmt: skip
    bound = {str(checkout), str(target), str(home), str(runner)}
    system = ("/usr", "/etc/", "/proc", "/dev", "/tmp", "/bin", "/sbin", "/lib")
    inside = sandbox._sandbox_env(env)  # with the CARGO_HOME and RUSTUP_HOME a build reads
    toolchains = [p for p in os.environ["PATH"].split(os.pathsep) if p] + [sys.prefix, sys.base_prefix]
    toolchains += [
        inside["RUSTUP_HOME"],
        *(str(Path(inside["CARGO_HOME"]) / part) for part in sandbox.CARGO_READ),
    ]
    for mount in mounts:
        assert (
            mount == "/"
            or mount in bound | hidden
            or mount.startswith(system)
            or any(mount == t or t.startswith(mount + "/") or mount.startswith(t + "/") for t in toolchains)
        ), f"PR code can read {mount}, which is neither the system, a toolchain nor the checkout"
    assert hidden <= set(mounts)  # each secret place has its own empty mount over it
    seen = {**_readable_tree(box, checkout, env, home), **_readable_tree(box, checkout, env, runner)}
    assert not any(text in json.dumps(seen) for text in secret_files.values()), seen
    assert "bin" not in seen  # folders, not files: the tool folders themselves are still there
