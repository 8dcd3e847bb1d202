#!/usr/bin/python3
"""Runs every command README.md and docs/README.md show, at smoke-test size, so none rots.

Usage: readme_smoke.py --edgesgd BIN --source REPO --work DIR [--list]

Commands come from the ```sh blocks (continuation lines joined, trailing `# comments` kept as
hints) and from inline `bash ...`, `python3 ...` and `edgesgd ... --help` spans. Each command
must match one of the RULES below, which says how it is run small; a command no rule knows fails
the test, so a README edit that adds a command also adds its rule here. The rules:

  edgesgd simulate / train     run with --rounds 3, source-relative paths made absolute
  edgesgd bench codecs         run with --dim 65536 --repeats 1
  edgesgd keygen, openssl      run as shown
  edgesgd privacy-budget       run as shown
  edgesgd server/worker/peer   a block's TCP commands run together on loopback: hosts become
                               127.0.0.1, each port a free one, `...` the flags of the block's
                               first command of that kind, --rounds 3; the devices a block
                               leaves out (`--workers N` with fewer workers shown, the other
                               entries of `--peers`) are started with the shown one's flags.
                               A second server in a block (`--resume`) runs after the first
                               finished, with its own workers.
  edgesgd --help, SUBCOMMAND --help   every subcommand's help
  run_demo.sh, run_tcp_demo.sh  with this binary, 3 rounds, 2 TCP workers
  run_experiments.py           experiment b (the two-client toy) into the work directory
  cmake --preset X -B DIR      configured only (the test stages build and run every preset)
  covered elsewhere            the test command itself, the stage builds, the Cortex-M4 images,
                               the mixed fleet, a bridge on a real board's tty

Every command runs in a fresh directory under --work with a 180 s limit and must exit 0.
"""

import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

DOCUMENTS = ["README.md", "docs/README.md"]
SHELL_LANGUAGES = {"sh", "bash", "shell", "console"}
SMOKE_ROUNDS = "3"
# A block that crashes its server and resumes needs a run long enough to be caught in the middle.
RESUME_ROUNDS = "100"
TIMEOUT_S = 180
SUBCOMMANDS = ["simulate", "server", "worker", "peer", "keygen", "train", "bench",
               "privacy-budget"]
# Flags a worker started in place of one the README leaves out takes from the server: the
# model and data must match, and so must the frame authentication.
SHARED_WITH_WORKERS = {"--task", "--data", "--dim", "--hidden", "--keys", "--tls-cert",
                       "--tls-key", "--tls-ca", "--samples", "--seed"}
# Flags that take no value (everything else in edgesgd's command line takes one).
SWITCHES = {"--resume", "--quiet", "--json", "--force", "--insecure", "--help"}


class Command:
    def __init__(self, document, words, hint, background):
        self.document = document
        self.words = words
        self.hint = hint
        self.background = background

    def __str__(self):
        return " ".join(self.words)


class Smoke:
    def __init__(self, edgesgd, source, work):
        self.edgesgd = edgesgd
        self.source = source
        self.work = work
        self.counter = 0

    # ---- running --------------------------------------------------------------------------

    def directory(self, label):
        self.counter += 1
        path = os.path.join(self.work, f"{self.counter:02d}-{re.sub(r'[^a-z0-9]+', '-', label)}")
        os.makedirs(path, exist_ok=True)
        return path

    def run(self, argv, cwd, env=None):
        print("  $ " + shlex.join(argv), flush=True)
        result = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=TIMEOUT_S, check=False)
        if result.returncode != 0:
            raise SmokeFailure(f"exit {result.returncode}:\n{tail(result.stdout)}")

    def absolutize(self, words):
        """Source-relative paths (examples/..., build/release/examples/edgesgd) made absolute."""
        out = []
        for word in words:
            if word == "build/release/examples/edgesgd":
                out.append(self.edgesgd)
            elif re.match(r"^(examples|tests|docs)/", word) and os.path.exists(
                    os.path.join(self.source, word)):
                out.append(os.path.join(self.source, word))
            else:
                out.append(word)
        return out

    # ---- the rules --------------------------------------------------------------------------

    def edgesgd_single(self, command, block):
        words = self.absolutize(command.words[1:])
        sub = words[0]
        if sub in ("simulate", "train"):
            words = set_flag(words, "--rounds", SMOKE_ROUNDS)
        elif sub == "bench" and words[1:2] == ["codecs"]:
            words = set_flag(set_flag(words, "--dim", "65536"), "--repeats", "1")
        self.run([self.edgesgd] + words, block.cwd)

    def help_pages(self, command, block):
        subcommands = SUBCOMMANDS if command.words[1] == "SUBCOMMAND" else [None]
        for sub in subcommands:
            self.run([self.edgesgd] + ([sub] if sub else []) + ["--help"], block.cwd)

    def shell_tool(self, command, block):
        self.run(command.words, block.cwd)

    def demo_script(self, command, block):
        env = dict(os.environ, EDGESGD_DEMO_BINARY=self.edgesgd, EDGESGD_DEMO_ROUNDS=SMOKE_ROUNDS,
                   EDGESGD_DEMO_WORKERS="2", EDGESGD_DEMO_OUT=os.path.join(block.cwd, "out"))
        self.run(["bash", os.path.join(self.source, command.words[1])], block.cwd, env)

    def experiments(self, command, block):
        script = os.path.join(self.source, "examples/experiments/run_experiments.py")
        self.run([command.words[0], script, "--only", "b", "--jobs", "2", "--edgesgd",
                  self.edgesgd, "--out", os.path.join(block.cwd, "runs"), "--results",
                  os.path.join(block.cwd, "RESULTS.md")], block.cwd)

    def configure_only(self, command, block):
        words = list(command.words)
        env = dict(os.environ)
        while words and re.match(r"^[A-Z_]+=", words[0]):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        words = set_flag(words, "-B", os.path.join(block.cwd, os.path.basename(flag(words, "-B"))))
        self.run(words + ["-S", self.source], block.cwd, env)

    def tcp(self, command, block):
        block.tcp.append(command)

    # ---- TCP blocks -------------------------------------------------------------------------

    def run_tcp_block(self, block):
        """Runs a block's server, worker and peer commands together, in phases per server.

        A phase whose server has --resume continues the one before it: that phase's server is
        killed (a crash) once its first checkpoint is on disk, its workers stay up and reconnect
        to the resumed server, which must report where it resumed."""
        ports = {}
        phases = []
        for command in block.tcp:
            kind = command.words[1]
            if not phases or kind == "server" or (
                    kind == "peer" and all(c.words[1] != "peer" for c in phases[-1])):
                phases.append([])
            phases[-1].append(command)
        resumes = ["--resume" in phase[0].words for phase in phases]
        firsts = {}
        carried = []
        try:
            for index, phase in enumerate(phases):
                crash = index + 1 < len(phases) and resumes[index + 1]
                rounds = RESUME_ROUNDS if crash or resumes[index] else SMOKE_ROUNDS
                expanded = []
                for command in phase:
                    words = command.words[1:]
                    sub = words[0]
                    if "..." in words:
                        words = merge_flags([w for w in words if w != "..."],
                                            firsts.get(sub, [sub]))
                    if sub != "worker":
                        words = set_flag(words, "--rounds", rounds)
                    firsts.setdefault(sub, words)
                    expanded.append(localize(words, ports))
                carried = self.run_tcp_phase(expanded, block.cwd, carried, crash)
        finally:
            stop(carried)

    def run_tcp_phase(self, commands, cwd, carried, crash):
        """Starts a phase's processes (and the devices it leaves out) beside the carried ones.
        Waits for all of them to end with status 0, or with `crash` kills the server once it
        has written a checkpoint and returns the other processes, still running."""
        for words in commands:
            keys = flag(words, "--keys")
            if keys and not os.path.exists(os.path.join(cwd, keys)):
                self.run([self.edgesgd, "keygen", "--devices", "256", "--out", keys], cwd)
        servers = [w for w in commands if w[0] == "server"]
        workers = [w for w in commands if w[0] == "worker"]
        peers = [w for w in commands if w[0] == "peer"]
        for server in servers:
            if carried:
                break  # the crashed server's workers reconnect
            shown = {flag(w, "--id") for w in workers}
            template = workers[0] if workers else ["worker", "--connect", flag(server, "--listen")]
            template = merge_flags(template, server, SHARED_WITH_WORKERS)
            for device in range(1, int(flag(server, "--workers") or "8") + 1):
                if str(device) not in shown:
                    workers.append(set_flag(template, "--id", str(device)))
        for peer in list(peers):
            shown = {flag(w, "--id") for w in peers}
            for device in range(1, len(flag(peer, "--peers").split(",")) + 1):
                if str(device) not in shown:
                    address = flag(peer, "--peers").split(",")[device - 1]
                    peers.append(set_flag(set_flag(peer, "--id", str(device)), "--listen",
                                          address))
        processes = list(carried)
        try:
            for words in servers + peers + workers:
                argv = [self.edgesgd] + words
                if words[0] == "server":
                    port_file = os.path.join(cwd, "server.port")
                    if os.path.exists(port_file):
                        os.remove(port_file)
                    argv += ["--port-file", port_file]
                print("  $ " + shlex.join(argv) + " &", flush=True)
                name = f"{words[0]}{flag(words, '--id') or ''}"
                log = open(os.path.join(cwd, f"{name}.{len(processes)}.log"), "w+b")
                processes.append((words, log, subprocess.Popen(
                    argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)))
                if words[0] == "server":
                    wait_for_file(port_file, processes[-1][2])
            if crash:
                server = next(p for p in processes if p[0][0] == "server")
                wait_for_file(os.path.join(cwd, flag(server[0], "--checkpoint")), server[2])
                print("  (killing the server: a crash after its first checkpoint)", flush=True)
                stop([server])
                processes.remove(server)
                survivors, processes = processes, []
                return survivors
            deadline = time.monotonic() + TIMEOUT_S
            for words, log, process in processes:
                process.wait(timeout=max(1.0, deadline - time.monotonic()))
            for words, log, process in processes:
                log.seek(0)
                output = log.read()
                if process.returncode != 0:
                    raise SmokeFailure(f"{shlex.join(words)} exited {process.returncode}:\n"
                                       f"{tail(output)}")
                if "--resume" in words and b"resuming at round" not in output:
                    raise SmokeFailure(f"{shlex.join(words)} did not resume:\n{tail(output)}")
            return []
        finally:
            stop(processes)


def stop(processes):
    """Kills whatever still runs of (words, log, Popen) triples and closes their logs."""
    for _, log, process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


class Block:
    def __init__(self, cwd):
        self.cwd = cwd
        self.tcp = []


class SmokeFailure(Exception):
    pass


RULES = [  # (pattern over the command line, action or the reason it is not run here)
    (r"^bash tests/run_all\.sh$", "the test command itself (.ci/run)"),
    (r"^cmake --workflow --preset cortex-m4$", "the cortex-m4 stage of tests/run_all.sh"),
    (r"^tests/embedded/run_mcu\.sh build/cortex-m4/examples/mcu/\S+\.elf$",
     "the cortex-m4 stage's ctest runs every MCU image with run_mcu.sh"),
    (r"^cmake --build build/\S+ -j\d+$",
     "the test stages' builds (the asan stage builds the whole tree with Clang)"),
    (r"^ctest --test-dir build/\S+ -j\d+$",
     "the test stages' ctest runs (the asan stage's with Clang)"),
    (r"^for preset in [\w -]+; do cmake --preset \$preset && cmake --build build/\$preset; done$",
     "the test stages' builds"),
    (r"^ctest --test-dir build/cortex-m4 -R mcu_mixed_fleet --output-on-failure$",
     "the cortex-m4 stage's ctest runs mcu_mixed_fleet"),
    (r"^edgesgd bridge --serial /dev/tty",
     "needs a board on a tty; tcp_serial_* and mcu_mixed_fleet run the bridge on emulated lines"),
    (r"^(\w+=\S+ )*cmake --preset \w+ -B \S+( -D\S+)*$", Smoke.configure_only),
    (r"^bash examples/run_(tcp_)?demo\.sh$", Smoke.demo_script),
    (r"^(/usr/bin/)?python3 examples/experiments/run_experiments\.py\b", Smoke.experiments),
    (r"^edgesgd (SUBCOMMAND )?--help$", Smoke.help_pages),
    (r"^(edgesgd|build/release/examples/edgesgd) "
     r"(simulate|train|keygen|bench codecs|privacy-budget)\b", Smoke.edgesgd_single),
    (r"^edgesgd (server|worker|peer)\b", Smoke.tcp),
    (r"^openssl (req|x509) ", Smoke.shell_tool),
]


# ---- command lines ----------------------------------------------------------------------------

def flag(words, name):
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def set_flag(words, name, value):
    words = list(words)
    for i, word in enumerate(words):
        if word == name:
            words[i + 1] = value
            return words
    return words + [name, value]


def split_flags(words):
    """[(flag, value or None)] of a command's words after the subcommand."""
    pairs = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and word not in SWITCHES and i + 1 < len(words):
            pairs.append((word, words[i + 1]))
            i += 2
        else:
            pairs.append((word, None))
            i += 1
    return pairs


def merge_flags(words, template, only=None):
    """words plus the template's flags it does not give itself (only those in `only`, if set)."""
    given = {name for name, _ in split_flags(words[1:])}
    out = list(words)
    for name, value in split_flags(template[1:]):
        if name in given or (only is not None and name not in only) or name == "...":
            continue
        out += [name] if value is None else [name, value]
    return out


def localize(words, ports):
    """Hosts become 127.0.0.1 and each documented port a free local one."""
    def address(text):
        host, _, port = text.rpartition(":")
        if port not in ports:
            ports[port] = str(free_port())
        return f"127.0.0.1:{ports[port]}"

    out = list(words)
    for name in ("--listen", "--connect", "--peers"):
        value = flag(out, name)
        if value is not None:
            out = set_flag(out, name, ",".join(address(a) for a in value.split(",")))
    return out


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_file(path, process):
    """Waits for a non-empty file the process writes (its port file, its checkpoint)."""
    for _ in range(4000):
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return
        if process.poll() is not None:
            raise SmokeFailure(f"{process.args[1]} exited {process.returncode} before writing "
                               f"{os.path.basename(path)}")
        time.sleep(0.005)
    raise SmokeFailure(f"no {os.path.basename(path)} within 20 s")


def tail(data, lines=30):
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def extract(document, text):
    """The commands of a document: its shell blocks and inline command spans."""
    commands = []
    for match in re.finditer(r"^[ \t]*```(\w*)\n(.*?)^[ \t]*```", text, re.S | re.M):
        if match.group(1) not in SHELL_LANGUAGES:
            continue
        block = []
        logical = ""
        for line in match.group(2).splitlines():
            logical += line.strip()
            if logical.endswith("\\"):
                logical = logical[:-1] + " "
                continue
            if logical and not logical.startswith("#"):
                code, _, hint = logical.partition(" #")
                code = code.strip()
                background = code.endswith("&")
                code = code.rstrip("&").strip()
                # Optional arguments shown as [--flag value] are left out.
                code = re.sub(r"\s*\[[^\]]*\]", "", code)
                block.append(Command(document, shlex.split(code), hint.strip(), background))
            logical = ""
        commands.append(block)
    outside = re.sub(r"```.*?```", "", text, flags=re.S)
    for match in re.finditer(r"`((?:bash|python3|/usr/bin/python3) [^`]+|edgesgd [^`]*--help)`",
                             outside):
        commands.append([Command(document, shlex.split(match.group(1)), "", False)])
    return commands


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edgesgd", required=True, help="the edgesgd binary to run")
    parser.add_argument("--source", required=True, help="the source tree (README.md's directory)")
    parser.add_argument("--work", required=True, help="scratch directory (emptied first)")
    parser.add_argument("--list", action="store_true", help="print each command's rule only")
    args = parser.parse_args()
    smoke = Smoke(os.path.abspath(args.edgesgd), os.path.abspath(args.source),
                  os.path.abspath(args.work))
    subprocess.run(["rm", "-rf", smoke.work], check=True)
    os.makedirs(smoke.work)

    failures = []
    count = 0
    done = set()
    for document in DOCUMENTS:
        with open(os.path.join(smoke.source, document), encoding="utf-8") as f:
            blocks = extract(document, f.read())
        for commands in blocks:
            block = Block(None if args.list else smoke.directory(document))
            for command in commands:
                count += 1
                line = str(command)
                rule = next((r for pattern, r in RULES if re.search(pattern, line)), None)
                print(f"{document}: {line}", flush=True)
                if rule is None:
                    failures.append(f"{document}: no smoke rule for `{line}`: add one to "
                                    "tests/cli/readme_smoke.py")
                    print("  no rule", flush=True)
                elif isinstance(rule, str):
                    print(f"  covered by {rule}", flush=True)
                elif args.list:
                    pass
                elif rule != Smoke.tcp and line in done:
                    print("  ran above", flush=True)
                else:
                    done.add(line)
                    try:
                        rule(smoke, command, block)
                    except (SmokeFailure, subprocess.TimeoutExpired) as error:
                        failures.append(f"{document}: `{line}`: {error}")
            if block.tcp and not args.list:
                try:
                    smoke.run_tcp_block(block)
                except (SmokeFailure, subprocess.TimeoutExpired) as error:
                    failures.append(f"{document}: TCP block starting `{block.tcp[0]}`: {error}")
    print(f"readme smoke: {count} commands, {len(failures)} failed")
    for failure in failures:
        print("FAILED " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
