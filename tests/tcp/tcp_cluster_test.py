#!/usr/bin/python3
"""Loopback tests of `edgesgd server`, `worker` and `peer`: real processes over TCP.

Each scenario is one ctest test (they run in parallel: every server listens on port 0 and
reports its port through --port-file). Usage:
    tcp_cluster_test.py EDGESGD WORK_DIR SCENARIO
Exit status 0 on success; on failure one line saying what went wrong (plus the logs' tails).
"""

import hashlib
import hmac
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

# A small synthetic softmax problem: seconds per run, and an accuracy that says training worked.
DATA = ["--task", "softmax", "--data", "synthetic", "--dim", "40", "--samples", "300"]
MAJORITY = ["--aggregate", "majority", "--codec", "sign", "--optimizer", "signum", "--lr", "0.01"]
RUN_TIMEOUT_S = 60


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Cluster:
    """Processes of one scenario, all killed when it ends."""

    def __init__(self, edgesgd, work):
        self.edgesgd = edgesgd
        self.work = work
        self.processes = []
        # Processes whose failure ends the scenario at once (see keep_running).
        self.kept = []
        # A fresh directory: a metrics file left by an earlier run would satisfy wait_rows at once.
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        # Every run authenticates its frames (as deployments do) unless a scenario opts out.
        self.keys = {device: os.urandom(32) for device in range(1, 17)}
        key_file = self.path("keys")
        with open(os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("# device key\n")
            for device, key in self.keys.items():
                f.write("%d %s\n" % (device, key.hex()))
        self.security = ["--keys", key_file]

    def path(self, name):
        return os.path.join(self.work, name)

    def start(self, name, args, program=None):
        """`program`: the command that runs edgesgd (e.g. under an emulator), default the
        cluster's binary."""
        log = open(self.path(name + ".log"), "w")
        if args[0] in ("server", "worker", "peer"):
            args = args + self.security
        process = subprocess.Popen((program or [self.edgesgd]) + args, stdout=log,
                                   stderr=subprocess.STDOUT)
        process.name = name
        self.processes.append(process)
        return process

    def start_server(self, args, name="server", port=0, program=None):
        port_file = self.path(name + ".port")
        if os.path.exists(port_file):
            os.remove(port_file)
        process = self.start(name, ["server", "--listen", "127.0.0.1:%d" % port,
                                    "--port-file", port_file, "--quiet"] + args, program=program)
        deadline = time.time() + 20
        while not os.path.exists(port_file):
            check(process.poll() is None, "%s exited early: %s" % (name, self.tail(name)))
            check(time.time() < deadline, "%s did not report its port" % name)
            time.sleep(0.02)
        with open(port_file) as f:
            return process, int(f.read())

    def start_worker(self, port, worker_id, extra=(), program=None):
        return self.start("worker%d" % worker_id,
                          ["worker", "--connect", "127.0.0.1:%d" % port, "--id", str(worker_id),
                           "--reconnect-max-s", "0.2", "--give-up-s", "30", "--quiet"] + DATA +
                          list(extra), program=program)

    def keep_running(self, *processes):
        """While the scenario waits for something, any of these exiting with an error fails it
        at once with that process's own last words, instead of a timeout minutes later."""
        self.kept.extend(processes)

    def release(self, *processes):
        """Kept processes the scenario is about to stop itself, or no longer depends on."""
        for process in processes:
            self.kept.remove(process)

    def check_kept(self, waited=None):
        for process in self.kept:
            if process is not waited and process.poll() not in (None, 0):
                raise Failure("%s exited with %d: %s" % (process.name, process.returncode,
                                                         self.tail(process.name)))

    def wait(self, process, timeout=RUN_TIMEOUT_S, expect=0):
        deadline = time.time() + timeout
        while process.poll() is None:
            self.check_kept(waited=process)
            if time.time() >= deadline:
                raise Failure("%s still running after %d s: %s" % (process.name, timeout,
                                                                    self.tail(process.name)))
            time.sleep(0.05)
        check(process.returncode == expect, "%s exited with %d (expected %d): %s" % (
            process.name, process.returncode, expect, self.tail(process.name)))

    def tail(self, name, lines=6):
        try:
            with open(self.path(name + ".log")) as f:
                return " | ".join(f.read().strip().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def rows(self, metrics):
        try:
            with open(self.path(metrics)) as f:
                return max(0, len(f.read().strip().splitlines()) - 1)
        except OSError:
            return 0

    def wait_rows(self, metrics, rows, process, timeout=30):
        deadline = time.time() + timeout
        while self.rows(metrics) < rows:
            self.check_kept(waited=process)
            check(process.poll() is None, "%s exited before round %d" % (process.name, rows))
            check(time.time() < deadline, "%s did not reach round %d" % (process.name, rows))
            time.sleep(0.01)

    def summary(self, name):
        with open(self.path(name)) as f:
            return json.load(f)

    def close(self):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def closed_by_server(sock, within):
    """Whether the other end closes `sock` within `within` seconds (reading whatever comes)."""
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def read_model(path):
    with open(path, "rb") as f:
        data = f.read()
    return struct.unpack("<%df" % (len(data) // 4), data)


def simulate(cluster, args, name):
    process = cluster.start(name, ["simulate", "--quiet", "--model-out", cluster.path(name + ".bin"),
                                   "--summary", cluster.path(name + ".json")] + DATA + args)
    cluster.wait(process)
    return read_model(cluster.path(name + ".bin")), cluster.summary(name + ".json")


def train_over_tcp(cluster, args, workers, name="server", worker_extra=None,
                   worker_programs=None):
    """`worker_programs`: {worker id: command running edgesgd}, for workers of another
    architecture under qemu-user; the others run the cluster's binary."""
    server, port = cluster.start_server(
        ["--model-out", cluster.path(name + ".bin"), "--summary", cluster.path(name + ".json"),
         "--metrics", cluster.path(name + ".csv")] + DATA + args, name=name)
    started = [cluster.start_worker(port, w, (worker_extra or {}).get(w, ()),
                                    program=(worker_programs or {}).get(w))
               for w in range(1, workers + 1)]
    cluster.keep_running(*started)
    cluster.wait(server)
    cluster.release(*started)
    return read_model(cluster.path(name + ".bin")), cluster.summary(name + ".json")


# ---- scenarios ----

def matches_simulate(cluster):
    """Server + 4 worker processes reach the simulator's model for the same seed and config.

    Majority vote: the aggregate is an integer count of signs, independent of the order updates
    arrive in, so the final model must be bit-identical. Mean aggregation sums floats in arrival
    order, which TCP does not fix (the simulator's is its virtual-time order); float addition is
    not associative, so each round's mean may differ in the last bits. Tolerance: every
    coordinate within 1e-4 * (1 + |x|), and the final accuracy within 0.5 points."""
    common = ["--workers", "4", "--rounds", "40", "--seed", "7", "--quorum", "4"]
    majority = common + MAJORITY
    sim_model, sim_summary = simulate(cluster, majority, "sim_majority")
    tcp_model, tcp_summary = train_over_tcp(cluster, majority, 4, name="tcp_majority")
    check(len(sim_model) == len(tcp_model) and len(tcp_model) > 0, "model sizes differ")
    check(sim_model == tcp_model,
          "majority vote over TCP is not bit-identical to simulate (max diff %g)" %
          max(abs(a - b) for a, b in zip(sim_model, tcp_model)))
    check(sim_summary["final"]["accuracy"] == tcp_summary["final"]["accuracy"],
          "accuracy differs from simulate")
    check(tcp_summary["final"]["accuracy"] > 0.7,
          "majority vote over TCP trained to only %s" % tcp_summary["final"]["accuracy"])
    check(tcp_summary["network"]["frame_authentication"] == "keys",
          "the summary does not say the frames were authenticated: %s" % tcp_summary["network"])

    mean = common + ["--codec", "top_k", "--k-ratio", "0.1", "--feedback", "ef", "--lr", "0.1"]
    sim_model, sim_summary = simulate(cluster, mean, "sim_mean")
    tcp_model, tcp_summary = train_over_tcp(cluster, mean, 4, name="tcp_mean")
    worst = max(abs(a - b) / (1 + abs(a)) for a, b in zip(sim_model, tcp_model))
    check(worst <= 1e-4, "mean aggregation over TCP differs from simulate by %g (> 1e-4)" % worst)
    check(abs(sim_summary["final"]["accuracy"] - tcp_summary["final"]["accuracy"]) <= 0.005,
          "accuracy %s vs simulate's %s" % (tcp_summary["final"]["accuracy"],
                                            sim_summary["final"]["accuracy"]))
    print("majority: bit-identical; mean: max relative difference %g (%s)" %
          (worst, "bit-identical" if sim_model == tcp_model else "arrival order differed"))


def worker_keeps_its_shard(cluster):
    """Workers keep only their shard of Fashion-MNIST (every label, their own rows' pixels, in
    file order with their sample pool renumbered) and still train as simulate does, which holds
    the whole set: with majority vote the model is bit-identical, on a Dirichlet split (shards
    neither contiguous nor in file order) with mini-batches and on a sorted split with the full
    local batch."""
    run = ["--workers", "4", "--rounds", "20", "--seed", "7", "--quorum", "4"] + MAJORITY
    for name, split, batch in (("dirichlet", "dirichlet:0.5", "16"), ("sorted", "sorted", "0")):
        data = ["--data", "fashion-mnist", "--train-limit", "3000", "--split", split]
        flags = run + data + ["--batch", batch]
        sim_model, sim_summary = simulate(cluster, flags, "sim_" + name)
        tcp_model, tcp_summary = train_over_tcp(cluster, flags, 4, name="tcp_" + name,
                                                worker_extra={w: data for w in range(1, 5)})
        check(len(tcp_model) == 7850, "not Fashion-MNIST's softmax model")
        check(sim_model == tcp_model, "%s: workers holding their shard differ from simulate "
              "(max diff %g)" % (name, max(abs(a - b) for a, b in zip(sim_model, tcp_model))))
        check(sim_summary["final"]["accuracy"] == tcp_summary["final"]["accuracy"],
              "%s: accuracy differs from simulate" % name)
    print("dirichlet and sorted splits: bit-identical to simulate")


def private_training(cluster):
    """Differential privacy over TCP: server and workers draw their noise keys from the
    operating system, so two runs with the same seed and flags train to different models (the
    noise is secret: nobody can reproduce it from the seed), unlike simulate, whose keys come from
    the seed. Both still train, and account the same epsilon as simulate for the same flags. A
    distributed run (random_block, each worker adds its noise share) trains too."""
    common = ["--workers", "4", "--rounds", "40", "--seed", "7", "--quorum", "4", "--codec",
              "top_k", "--k-ratio", "0.1", "--feedback", "ef", "--lr", "0.1", "--dp-mode",
              "central", "--dp-clip", "0.5", "--dp-noise-multiplier", "0.05"]
    sim_model, sim_summary = simulate(cluster, common, "sim_private")
    first, first_summary = train_over_tcp(cluster, common, 4, name="tcp_private_1")
    second, second_summary = train_over_tcp(cluster, common, 4, name="tcp_private_2")
    check(first != second, "two private runs over TCP produced the same model: the noise is "
          "not secret")
    for summary in (first_summary, second_summary):
        check(summary["privacy"]["epsilon"] == sim_summary["privacy"]["epsilon"],
              "epsilon %s over TCP, %s in simulate" % (summary["privacy"]["epsilon"],
                                                       sim_summary["privacy"]["epsilon"]))
        check(summary["final"]["accuracy"] > 0.7,
              "a private run over TCP trained to only %s" % summary["final"]["accuracy"])
    distributed = [flag if flag != "central" else "distributed" for flag in common]
    distributed[distributed.index("top_k")] = "random_block"
    distributed[distributed.index("--k-ratio"):distributed.index("--k-ratio") + 2] = [
        "--block-ratio", "10"]
    _, summary = train_over_tcp(cluster, distributed, 4, name="tcp_distributed")
    check(summary["final"]["accuracy"] > 0.7,
          "a distributed private run over TCP trained to only %s" % summary["final"]["accuracy"])
    print("central: accuracy %s and %s (simulate %s), epsilon %s; distributed: accuracy %s" %
          (first_summary["final"]["accuracy"], second_summary["final"]["accuracy"],
           sim_summary["final"]["accuracy"], first_summary["privacy"]["epsilon"],
           summary["final"]["accuracy"]))


def secure_training(cluster):
    """Secure aggregation over TCP: each worker draws its round keys from the operating system
    and the server sees masked inputs only. The unmasked sum is exact in Z_2^32, whatever the keys
    and whatever order the inputs arrive in, so the model is bit-identical to simulate's secure
    run (a plain mean over TCP is not: its float sum follows the arrival order)."""
    common = ["--workers", "4", "--rounds", "30", "--seed", "7", "--quorum", "4", "--codec",
              "random_block", "--block-ratio", "16", "--feedback", "def", "--lr", "0.1",
              "--secure-aggregation"]
    sim_model, sim_summary = simulate(cluster, common, "sim_secure")
    tcp_model, tcp_summary = train_over_tcp(cluster, common, 4, name="tcp_secure")
    check(len(tcp_model) == len(sim_model) and len(tcp_model) > 0, "model sizes differ")
    check(sim_model == tcp_model, "secure aggregation over TCP is not bit-identical to simulate "
          "(max diff %g)" % max(abs(a - b) for a, b in zip(sim_model, tcp_model)))
    check(tcp_summary["network"]["secure_rounds_aborted"] == 0,
          "%d secure rounds aborted over TCP" % tcp_summary["network"]["secure_rounds_aborted"])
    check(tcp_summary["final"]["accuracy"] > 0.7,
          "secure aggregation over TCP trained to only %s" % tcp_summary["final"]["accuracy"])
    print("secure aggregation: bit-identical to simulate, accuracy %s" %
          tcp_summary["final"]["accuracy"])


def signed_secure_training(cluster):
    """Signed secure aggregation over TCP (--secagg-signed): `keygen` writes each device's ECDSA
    key; the devices sign their keys and the survivor set, and reveal only after checking their
    neighbours' signatures. The sum is as exact as unsigned rounds', so the model is
    bit-identical to simulate's signed run. A worker with a signing key refuses an unsigned run
    (a server could skip the check by not asking for it), and one without a key a signed run."""
    keygen = cluster.start("keygen", ["keygen", "--devices", "4", "--out", cluster.path("psk.txt"),
                                      "--per-device-dir", cluster.path("devices"),
                                      "--signing-keys", cluster.path("signing.txt"),
                                      "--verifying-keys", cluster.path("verifying.txt")])
    cluster.wait(keygen)
    verifying = ["--secagg-verifying-keys", cluster.path("verifying.txt")]

    def signing(w):
        return ["--secagg-signing-key", cluster.path("devices/device-%d.signing" % w)] + verifying

    common = ["--workers", "4", "--rounds", "20", "--seed", "7", "--quorum", "4", "--codec",
              "random_block", "--block-ratio", "16", "--feedback", "def", "--lr", "0.1",
              "--secure-aggregation", "--secagg-signed"]
    sim_model, _ = simulate(cluster, common, "sim_signed")
    tcp_model, summary = train_over_tcp(cluster, common + verifying, 4, name="tcp_signed",
                                        worker_extra={w: signing(w) for w in range(1, 5)})
    check(sim_model == tcp_model, "signed secure aggregation over TCP is not bit-identical to "
          "simulate")
    check(summary["secure_aggregation"]["signed"] == "yes", "the summary does not say signed")
    check(summary["network"]["secure_rounds_aborted"] == 0,
          "%d signed rounds aborted" % summary["network"]["secure_rounds_aborted"])

    # A signing key that is not the one the verifying keys list for the device: refused at start.
    other = cluster.start("keygen2", ["keygen", "--devices", "4", "--out", cluster.path("psk2.txt"),
                                      "--signing-keys", cluster.path("signing2.txt"),
                                      "--verifying-keys", cluster.path("verifying2.txt")])
    cluster.wait(other)
    stranger = cluster.start("stranger", ["worker", "--connect", "127.0.0.1:1", "--id", "1",
                                          "--secagg-signing-key", cluster.path("signing2.txt")] +
                             verifying + DATA)
    cluster.wait(stranger, timeout=20, expect=2)
    with open(cluster.path("stranger.log")) as f:
        check("is not the one" in f.read(), "a mismatched signing key was not refused")

    # Mismatches: each refused with one line, the server serving on.
    unsigned = [flag for flag in common if flag != "--secagg-signed"]
    server, port = cluster.start_server(DATA + unsigned + ["--rounds", "5"], name="unsigned")
    refusing = cluster.start_worker(port, 1, signing(1))
    cluster.wait(refusing, timeout=30, expect=1)
    with open(cluster.path("worker1.log")) as f:
        log = f.read()
    check("does not" in log and "consistency" in log,
          "a signing worker joined an unsigned run without saying why: %s" % log[-300:])
    server.kill()
    server.wait()
    server, port = cluster.start_server(DATA + common + verifying + ["--rounds", "5"],
                                        name="signed")
    keyless = cluster.start_worker(port, 2)
    cluster.wait(keyless, timeout=30, expect=1)
    with open(cluster.path("worker2.log")) as f:
        log = f.read()
    check("no signing key" in log, "a keyless worker joined a signed run: %s" % log[-300:])
    server.kill()
    server.wait()
    print("signed secure aggregation: bit-identical to simulate, accuracy %s; mismatched "
          "workers refused" % summary["final"]["accuracy"])


def slowed_workers(cluster, port, ids, slowdown):
    """Workers on a larger model with --slowdown: rounds of ~10 ms, so a run outlasts the
    events a scenario injects into it."""
    return {w: cluster.start("worker%d" % w,
                             ["worker", "--connect", "127.0.0.1:%d" % port, "--id", str(w),
                              "--slowdown", str(slowdown), "--reconnect-max-s", "0.2",
                              "--give-up-s", "30", "--quiet"] + SLOW_DATA) for w in ids}


SLOW_DATA = ["--task", "softmax", "--data", "synthetic", "--dim", "200", "--samples", "2000"]


def kill_worker(cluster):
    """kill -9 a worker mid-run, restart it: the run completes and the worker rejoins."""
    server, port = cluster.start_server(
        SLOW_DATA + ["--workers", "4", "--rounds", "200", "--quorum", "3", "--batch", "256",
                     "--round-deadline-s", "0.5", "--eval-every", "50",
                     "--metrics", cluster.path("server.csv"),
                     "--summary", cluster.path("server.json"), "--idle-timeout-s", "5"])
    workers = slowed_workers(cluster, port, range(1, 5), 20)
    cluster.wait_rows("server.csv", 20, server)
    workers[2].send_signal(signal.SIGKILL)
    workers[2].wait()
    rows_at_kill = cluster.rows("server.csv")
    cluster.wait_rows("server.csv", rows_at_kill + 10, server)  # training goes on without it
    workers.update(slowed_workers(cluster, port, [2], 20))
    check(server.poll() is None and cluster.rows("server.csv") < 180,
          "the run ended before the worker was restarted: lengthen it")
    cluster.wait(server)
    for w in (1, 2, 3, 4):
        cluster.wait(workers[w], timeout=20)
    summary = cluster.summary("server.json")
    check(summary["final"]["round"] == 200, "the run did not complete")
    check(summary["network"]["rejoins"] >= 1, "the restarted worker did not rejoin")
    check(summary["network"]["disconnects"] >= 1, "the killed worker's link was not noticed")


def server_vanishes(cluster):
    """kill -9 the server mid-run: the workers keep redialling, then give up after --give-up-s
    without a connection and exit with an error rather than hang."""
    server, port = cluster.start_server(
        SLOW_DATA + ["--workers", "2", "--rounds", "100000", "--metrics", cluster.path("server.csv")])
    workers = [cluster.start("worker%d" % w,
                             ["worker", "--connect", "127.0.0.1:%d" % port, "--id", str(w),
                              "--slowdown", "20", "--reconnect-max-s", "0.2", "--give-up-s", "2",
                              "--quiet"] + SLOW_DATA) for w in (1, 2)]
    cluster.wait_rows("server.csv", 5, server)
    server.send_signal(signal.SIGKILL)
    server.wait()
    killed = time.time()
    for worker in workers:
        cluster.wait(worker, timeout=20, expect=1)
    waited = time.time() - killed
    check(waited < 10, "the workers took %.1f s to give up (--give-up-s 2)" % waited)
    print("workers gave up %.1f s after the server vanished" % waited)


def server_resume(cluster):
    """kill -9 the server mid-run, resume it from its checkpoint: workers reconnect, no committed
    round is lost, and (majority vote: order-independent) the final model equals simulate's."""
    args = ["--workers", "4", "--rounds", "150", "--eval-every", "10", "--seed", "11",
            "--quorum", "4"] + MAJORITY
    sim_model, _ = simulate(cluster, args, "sim")
    checkpoint = cluster.path("server.ckpt")
    server_args = DATA + args + ["--checkpoint", checkpoint, "--model-out", cluster.path("tcp.bin"),
                                 "--summary", cluster.path("server.json")]
    first, port = cluster.start_server(server_args + ["--metrics", cluster.path("first.csv")],
                                       name="first")
    workers = [cluster.start_worker(port, w) for w in range(1, 5)]
    cluster.wait_rows("first.csv", 20, first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    second, _ = cluster.start_server(
        server_args + ["--resume", "--metrics", cluster.path("second.csv")], name="second",
        port=port)
    cluster.wait(second)
    for worker in workers:
        cluster.wait(worker, timeout=20)
    with open(cluster.path("second.csv")) as f:
        lines = f.read().splitlines()
    check(len(lines) > 1, "the second server ran no round (the first finished before the kill?)")
    resumed_at = int(lines[1].split(",")[0])
    # The killed server's CSV may have lost buffered rows; the checkpoint is what counts: the
    # second server continued from it (not from round 1), and the final model below equals an
    # uninterrupted run's only if no committed round was lost or applied twice.
    check(1 < resumed_at <= 150, "the second server did not resume (first round %d)" % resumed_at)
    tcp_model = read_model(cluster.path("tcp.bin"))
    check(tcp_model == sim_model, "the resumed run's model differs from an uninterrupted run's")
    print("resumed at round %d; final model bit-identical to simulate" % resumed_at)


def resume_refuses_changes(cluster):
    """A checkpoint belongs to one configuration: --resume with any run setting changed is
    refused, naming the setting (its flag), and with the same settings it is taken."""
    args = DATA + ["--workers", "2", "--rounds", "4", "--seed", "5", "--quorum", "2",
                   "--codec", "top_k", "--k-ratio", "0.1", "--feedback", "ef", "--lr", "0.1",
                   "--checkpoint", cluster.path("run.ckpt")]
    train_over_tcp(cluster, args, 2)
    changes = [(["--k-ratio", "0.2"], "--k-ratio"), (["--codec", "rand_k"], "--codec"),
               (["--downlink", "aggregate"], "--downlink"), (["--lr", "0.2"], "--lr"),
               (["--seed", "6"], "--seed"), (["--workers", "3", "--quorum", "2"], "--workers"),
               (["--batch", "16"], "--batch"), (["--local-steps", "2"], "--local-steps"),
               (["--participation", "0.5"], "--participation"), (["--rounds", "5"], "--rounds"),
               (["--optimizer", "momentum"], "--momentum")]
    for index, (change, flag) in enumerate(changes):
        name = "resume%d" % index
        process = cluster.start(name, ["server", "--listen", "127.0.0.1:0", "--resume"] + args +
                                change)
        cluster.wait(process, timeout=30, expect=1)
        check("differs in %s" % flag in cluster.tail(name),
              "resume with %s was not refused naming %s: %s" % (" ".join(change), flag,
                                                               cluster.tail(name)))
    same = cluster.start("same", ["server", "--listen", "127.0.0.1:0", "--resume"] + args)
    cluster.wait(same, timeout=30)
    print("--resume refused %d changed settings, each named; the unchanged run resumed" %
          len(changes))


def hostile_clients(cluster):
    """Random bytes, a 4 GiB length prefix, garbage in a valid-length frame and a connection
    that never speaks: each is closed and counted, and the run completes meanwhile. Plain frames
    (--insecure): the framing itself must stand up to them (auth_attacks covers the records)."""
    cluster.security = ["--insecure"]
    server, port = cluster.start_server(
        SLOW_DATA + ["--workers", "3", "--rounds", "300", "--quorum", "3", "--batch", "256",
                     "--eval-every", "50", "--hello-timeout-s", "0.5",
                     "--metrics", cluster.path("server.csv"),
                     "--summary", cluster.path("server.json")])
    workers = list(slowed_workers(cluster, port, range(1, 4), 20).values())
    cluster.wait_rows("server.csv", 5, server)

    def connect():
        return socket.create_connection(("127.0.0.1", port), timeout=5)

    rng = random.Random(5)
    noise = connect()
    noise.sendall(bytes(rng.getrandbits(8) for _ in range(4096)))
    huge = connect()
    huge.sendall(struct.pack("<I", 0xFFFFFFFF) + b"\0" * 60)
    garbage = connect()
    garbage.sendall(struct.pack("<I", 60) + bytes(rng.getrandbits(8) for _ in range(60)))
    silent = connect()
    for sock, what in ((huge, "4 GiB prefix"), (noise, "random bytes"), (garbage, "garbage frame"),
                       (silent, "silent connection")):
        check(closed_by_server(sock, 5), "the server kept the %s connection open" % what)
        sock.close()
    check(server.poll() is None and cluster.rows("server.csv") < 300,
          "the run ended before the attacks were over: lengthen it")
    cluster.wait(server)
    for worker in workers:
        cluster.wait(worker, timeout=20)
    network = cluster.summary("server.json")["network"]
    check(network["oversized_frames"] >= 1, "the 4 GiB prefix was not counted")
    check(network["unidentified_connections"] >= 2, "garbage / silent connections not counted")
    check(network["hello_timeouts"] >= 1, "the silent connection was not timed out")
    check(cluster.summary("server.json")["final"]["round"] == 300, "the run did not complete")
    check(network["frame_authentication"] == "none (--insecure)" and not network["tls"],
          "the summary does not say the frames were unauthenticated: %s" % network)
    with open(cluster.path("server.log")) as f:
        check("--insecure: frames are not authenticated" in f.read(),
              "the server did not warn that --insecure frames are unauthenticated")


def worker_receive_limit(cluster):
    """Until it has accepted a run's Welcome, a worker takes control frames only: a "server" that
    answers the worker's Join with the length prefix of a 4 MB frame has the connection closed,
    unread and logged with the limit; the worker keeps trying to join."""
    cluster.security = ["--insecure"]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(10)
    worker = cluster.start("worker1", ["worker", "--connect",
                                       "127.0.0.1:%d" % listener.getsockname()[1], "--id", "1",
                                       "--reconnect-max-s", "0.2", "--give-up-s", "30"] + DATA)
    cluster.keep_running(worker)
    for attempt in range(2):
        connection, _ = listener.accept()
        connection.settimeout(5)
        (body,) = struct.unpack("<I", connection.recv(4))
        check(body <= 640, "the worker's first frame (a Join) announced %d bytes" % body)
        connection.sendall(struct.pack("<I", 4000156) + b"\0" * 64)
        check(closed_by_server(connection, 5),
              "the worker kept reading a 4 MB frame before any Welcome (attempt %d)" % attempt)
        connection.close()
    listener.close()
    check("announced a frame of 4000156 bytes (limit 640)" in cluster.tail("worker1", 20),
          "the worker did not log the refused frame: %s" % cluster.tail("worker1"))
    cluster.release(worker)
    print("a 4 MB frame before the Welcome was refused unread, twice; the worker reconnected")


# ---- frame authentication (transport/auth/include/edgesgd/auth/connection_auth.h) ----

AUTH_LABEL = b"edgesgd-auth-v1"


def auth_key(key, purpose, device, initiator_nonce, responder_nonce):
    """The documented key schedule, written independently of the C++ implementation."""
    return hmac.new(key, AUTH_LABEL + bytes([purpose]) + struct.pack("<I", device) +
                    initiator_nonce + responder_nonce, hashlib.sha256).digest()


def initiator_hello(device, nonce):
    return b"EDGA" + bytes([1, 1, 0, 0]) + struct.pack("<II", device, 0) + nonce


def recv_exact(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class AttackProxy:
    """Relays a worker's connections to the server, attacking one connection each: the 1st gets
    its third record replayed, the 2nd a flipped payload bit in its third record, the 3rd the 1st
    connection's first record injected after its hello; later ones pass untouched."""

    def __init__(self, server_port):
        self.server_port = server_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.captured = None
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            client, _ = self.listener.accept()
            self.connections += 1
            upstream = socket.create_connection(("127.0.0.1", self.server_port))
            threading.Thread(target=self.relay, args=(upstream, client), daemon=True).start()
            threading.Thread(target=self.attack, args=(client, upstream, self.connections),
                             daemon=True).start()

    @staticmethod
    def close(*socks):
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def relay(self, source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        self.close(source, sink)

    def attack(self, worker, server, connection):
        try:
            server.sendall(recv_exact(worker, 32))  # the worker's hello
            if connection == 3 and self.captured:
                server.sendall(self.captured)
            index = 0
            while True:
                header = recv_exact(worker, 16)
                record = header + recv_exact(worker, struct.unpack_from("<I", header)[0] + 32)
                if connection == 1 and index == 0:
                    self.captured = record
                if connection == 2 and index == 2:
                    record = record[:20] + bytes([record[20] ^ 0x04]) + record[21:]
                server.sendall(record)
                if connection == 1 and index == 2:
                    server.sendall(record)
                index += 1
        except (OSError, ConnectionError):
            pass
        self.close(worker, server)


def auth_attacks(cluster):
    """Authenticated frames under attack while a run goes on: a replayed record, a record with a
    flipped bit and a record replayed from an earlier connection (a proxy in front of worker 1),
    a client speaking plain frames, a hello for an unknown device, a client with the wrong key
    and one announcing a 4 GiB record. Each is rejected, counted and logged and its connection closed; worker 1 reconnects
    and the run completes. The client side also checks the server's hello against the key
    schedule as documented."""
    server, port = cluster.start_server(
        SLOW_DATA + ["--workers", "3", "--rounds", "150", "--quorum", "2", "--batch", "256",
                     "--round-deadline-s", "0.5", "--eval-every", "50",
                     "--hello-timeout-s", "2", "--metrics", cluster.path("server.csv"),
                     "--summary", cluster.path("server.json")])
    proxy = AttackProxy(port)
    workers = slowed_workers(cluster, proxy.port, [1], 20)
    workers.update(slowed_workers(cluster, port, [2, 3], 20))
    cluster.wait_rows("server.csv", 5, server)

    def connect():
        return socket.create_connection(("127.0.0.1", port), timeout=5)

    plain = connect()  # a valid-length frame, as an --insecure worker would send
    plain.sendall(struct.pack("<I", 40) + b"\0" * 36)
    stranger = connect()
    stranger.sendall(initiator_hello(99, os.urandom(16)))
    impostor = connect()
    nonce = os.urandom(16)
    impostor.sendall(initiator_hello(2, nonce))
    reply = recv_exact(impostor, 64)
    check(reply[:16] == b"EDGA" + bytes([1, 2, 0, 0]) + struct.pack("<II", 2, 0),
          "unexpected responder hello %s" % reply[:16].hex())
    check(reply[32:] == auth_key(cluster.keys[2], 3, 2, nonce, reply[16:32]),
          "the server's confirmation does not follow the documented key schedule")
    wrong = auth_key(os.urandom(32), 1, 2, nonce, reply[16:32])
    payload = b"\0" * 40
    header = struct.pack("<IIQ", len(payload), 2, 0)
    impostor.sendall(header + payload + hmac.new(wrong, header + payload, hashlib.sha256).digest())
    oversized = connect()  # a 4 GiB record announced right after the hellos
    oversized.sendall(initiator_hello(3, os.urandom(16)))
    recv_exact(oversized, 64)
    oversized.sendall(struct.pack("<IIQ", 0xFFFFFFF0, 3, 0))
    for sock, what in ((plain, "plain-frame"), (stranger, "unknown-device"),
                       (impostor, "wrong-key"), (oversized, "oversized-record")):
        check(closed_by_server(sock, 5), "the server kept the %s connection open" % what)
        sock.close()

    deadline = time.time() + 30
    while proxy.connections < 4:
        check(server.poll() is None, "the run ended before worker 1 reconnected through all "
                                     "attacks (%d connections): lengthen it" % proxy.connections)
        check(time.time() < deadline, "worker 1 did not reconnect after the attacks")
        time.sleep(0.05)
    rows_after_attacks = cluster.rows("server.csv")
    check(server.poll() is None and rows_after_attacks < 150,
          "the run ended before the attacks were over: lengthen it")
    cluster.wait(server)
    for worker in workers.values():
        cluster.wait(worker, timeout=20)
    summary = cluster.summary("server.json")
    check(summary["final"]["round"] == 150, "the run did not complete")
    rejected = summary["network"]["auth_rejected"]
    check(rejected >= 6, "only %d authentication rejections counted (expected 6)" % rejected)
    check(summary["network"]["oversized_frames"] >= 1, "the oversized record was not counted")
    with open(cluster.path("server.log")) as f:
        log = f.read()
    for reason in ("replayed or out of sequence", "bad tag", "unknown device", "malformed"):
        check("(%s): closing" % reason in log, "no log line for a %s rejection" % reason)
    print("%d rejections counted; worker 1 connected %d times; attacks over by round %d of 150" %
          (rejected, proxy.connections, rows_after_attacks))


# A model of 200,010 parameters: its dense updates (about 800 KB) set the server's frame limit,
# so a flood announcing frames just below it would cost about that much per connection.
LARGE_DATA = ["--task", "softmax", "--data", "synthetic", "--dim", "20000", "--samples", "300"]
FLOOD_ANNOUNCED_BYTES = 790000


def server_rss_mb(process):
    with open("/proc/%d/status" % process.pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


class LargeRun:
    """A server and two workers on LARGE_DATA (`program`: the server's command, e.g. under
    prlimit), running: the target of an attack that must not stop it. end() checks that it
    completed and returns the server's summary."""

    def __init__(self, cluster, rounds, program=None):
        self.cluster = cluster
        self.rounds = rounds
        self.server, self.port = cluster.start_server(
            LARGE_DATA + ["--workers", "2", "--rounds", str(rounds), "--quorum", "2",
                          "--eval-every", str(rounds // 2), "--metrics", cluster.path("server.csv"),
                          "--summary", cluster.path("server.json")], program=program)
        self.workers = [cluster.start("worker%d" % w,
                                      ["worker", "--connect", "127.0.0.1:%d" % self.port, "--id",
                                       str(w), "--slowdown", "4", "--reconnect-max-s", "0.2",
                                       "--give-up-s", "30", "--quiet"] + LARGE_DATA)
                        for w in (1, 2)]
        cluster.keep_running(*self.workers)
        cluster.wait_rows("server.csv", 5, self.server, timeout=60)

    def end(self, attack):
        check(self.server.poll() is None and self.cluster.rows("server.csv") < self.rounds,
              "the run ended before the %s was over: lengthen it" % attack)
        self.cluster.wait(self.server, timeout=120)
        self.cluster.release(*self.workers)
        for worker in self.workers:
            self.cluster.wait(worker, timeout=20)
        summary = self.cluster.summary("server.json")
        check(summary["final"]["round"] == self.rounds, "the run did not complete")
        return summary


def connection_flood(cluster, secure):
    """Hundreds of connections that have proved nothing, against a server in a run: 200 that
    announce an 800 KB frame (after an authentication hello naming a real device, or as a plain
    length prefix) and then trickle a byte every half second, and 150 that stay silent. The
    first are closed at once (a first frame is at most a control frame), the second are closed
    oldest first beyond --max-unidentified-connections; the server grows by at most 64 MB and
    the workers finish."""
    if not secure:
        cluster.security = ["--insecure"]
    run = LargeRun(cluster, 400)
    server, port = run.server, run.port
    before = peak = server_rss_mb(server)

    def opened(announce):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if secure:
            sock.sendall(initiator_hello(1, os.urandom(16)))
            recv_exact(sock, 64)
        if announce:
            sock.sendall(struct.pack("<IIQ", FLOOD_ANNOUNCED_BYTES, 1, 0) if secure
                         else struct.pack("<I", FLOOD_ANNOUNCED_BYTES))
        return sock

    announcing = [opened(True) for _ in range(200)]
    silent = [opened(False) for _ in range(150)]
    for _ in range(6):
        for sock in announcing:
            try:
                sock.sendall(b"\0")
            except OSError:
                pass  # closed by the server, as it should be
        peak = max(peak, server_rss_mb(server))
        time.sleep(0.5)
    closed = sum(closed_by_server(sock, 0.2) for sock in announcing)
    for sock in announcing + silent:
        sock.close()
    check(closed == len(announcing),
          "%d of %d connections announcing %d-byte frames were kept open" %
          (len(announcing) - closed, len(announcing), FLOOD_ANNOUNCED_BYTES))
    network = run.end("flood")["network"]
    check(network["oversized_frames"] >= len(announcing),
          "%d oversized first frames counted, not %d" % (network["oversized_frames"],
                                                        len(announcing)))
    check(network["unidentified_evicted"] >= len(silent) - 64,
          "only %d silent connections were closed to make room" % network["unidentified_evicted"])
    check(peak - before <= 64, "the server grew from %.0f MB to %.0f MB under the flood" %
          (before, peak))
    print("%s flood: server %.0f MB -> peak %.0f MB; %d oversized first frames, %d silent "
          "connections evicted; the run completed" %
          ("authenticated" if secure else "plain", before, peak, network["oversized_frames"],
           network["unidentified_evicted"]))


def server_cpu_seconds(process):
    with open("/proc/%d/stat" % process.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descriptor_exhaustion(cluster):
    """A server limited to 40 file descriptors, held at the limit by 100 silent connections:
    accepting pauses instead of spinning (the server uses well under half a core meanwhile),
    the oldest silent connections are closed to make room, and the run completes."""
    run = LargeRun(cluster, 300, program=["prlimit", "--nofile=40:40", cluster.edgesgd])
    server, port = run.server, run.port
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(100)]
    time.sleep(0.5)
    start_cpu, start = server_cpu_seconds(server), time.time()
    time.sleep(2)
    share = (server_cpu_seconds(server) - start_cpu) / (time.time() - start)
    for sock in held:
        sock.close()
    network = run.end("descriptor exhaustion")["network"]
    check(network["accept_backoffs"] >= 1, "the server never ran out of descriptors: %s" % network)
    check(share < 0.5, "the server used %.0f %% of a core while out of descriptors" % (share * 100))
    print("out of descriptors: %d accept pauses, %d silent connections evicted, %.0f %% of a core; "
          "the run completed" % (network["accept_backoffs"], network["unidentified_evicted"],
                                 share * 100))


def unauthenticated_flood(cluster):
    connection_flood(cluster, secure=True)


def plain_flood(cluster):
    connection_flood(cluster, secure=False)


def slow_worker(cluster):
    """One worker 10x slower: rounds close at the deadline with the quorum, the run completes.
    Workers heartbeat every 10 ms: the server's liveness timeout is three 20 ms deadlines, and a
    worker that joined first must still count as live when the last one joins."""
    server, port = cluster.start_server(
        ["--task", "softmax", "--data", "synthetic", "--dim", "200", "--samples", "2000",
         "--batch", "256", "--workers", "4", "--rounds", "40", "--quorum", "3",
         "--round-deadline-s", "0.02", "--summary", cluster.path("server.json")])
    workers = []
    for w in range(1, 5):
        extra = ["--slowdown", "10"] if w == 4 else []
        workers.append(cluster.start(
            "worker%d" % w, ["worker", "--connect", "127.0.0.1:%d" % port, "--id", str(w),
                             "--task", "softmax", "--data", "synthetic", "--dim", "200",
                             "--samples", "2000", "--heartbeat-s", "0.01", "--quiet"] + extra))
    cluster.wait(server)
    for worker in workers:
        cluster.wait(worker, timeout=20)
    summary = cluster.summary("server.json")
    check(summary["final"]["round"] == 40, "the run did not complete")
    check(summary["final"]["accuracy"] > 0.5, "training failed: %s" % summary["final"])


def mismatched_worker(cluster):
    """A worker whose data flags do not fit the server's model exits with a one-line error; the
    server goes on serving and the run completes with the right workers."""
    server, port = cluster.start_server(
        DATA + ["--workers", "2", "--rounds", "30", "--summary", cluster.path("server.json")])
    wrong = cluster.start("wrong", ["worker", "--connect", "127.0.0.1:%d" % port, "--id", "1",
                                    "--task", "softmax", "--data", "synthetic", "--dim", "41"])
    cluster.wait(wrong, timeout=20, expect=1)
    with open(cluster.path("wrong.log")) as f:
        errors = [line for line in f.read().splitlines() if "edgesgd worker:" in line]
    check(len(errors) == 1 and "parameters" in errors[0], "no one-line explanation: %s" % errors)
    workers = [cluster.start_worker(port, w) for w in (1, 2)]
    cluster.wait(server)
    for worker in workers:
        cluster.wait(worker, timeout=20)
    check(cluster.summary("server.json")["final"]["round"] == 30, "the run did not complete")


def per_device_keys(cluster):
    """Keys from `edgesgd keygen --per-device-dir`: the server loads the shared file, each worker
    its own device's file, and the run completes over authenticated frames; a worker given
    another device's file is refused at start with a one-line error."""
    shared, devices = cluster.path("fleet.keys"), cluster.path("devices")
    keygen = subprocess.run([cluster.edgesgd, "keygen", "--devices", "2", "--out", shared,
                             "--per-device-dir", devices], capture_output=True, text=True)
    check(keygen.returncode == 0, "keygen failed: %s" % keygen.stderr.strip())
    cluster.security = ["--keys", shared]
    server, port = cluster.start_server(
        DATA + ["--workers", "2", "--rounds", "10", "--summary", cluster.path("server.json")])
    cluster.security = []  # each worker is given its own file below

    def own_file(device):
        return ["--keys", os.path.join(devices, "device-%d.key" % device)]

    wrong = cluster.start("wrong", ["worker", "--connect", "127.0.0.1:%d" % port, "--id", "1",
                                    "--quiet"] + DATA + own_file(2))
    cluster.wait(wrong, timeout=20, expect=2)
    check("has no key for device 1" in cluster.tail("wrong"),
          "no one-line explanation: %s" % cluster.tail("wrong"))
    workers = [cluster.start_worker(port, w, own_file(w)) for w in (1, 2)]
    cluster.keep_running(*workers)
    cluster.wait(server)
    cluster.release(*workers)
    for worker in workers:
        cluster.wait(worker, timeout=20)
    summary = cluster.summary("server.json")
    check(summary["final"]["round"] == 10, "the run did not complete")
    check(summary["network"]["frame_authentication"] == "keys",
          "the frames were not authenticated: %s" % summary["network"])


def make_certificates(cluster, name, ca=None):
    """A P-256 key and certificate `name` signed by `ca` (a (certificate, key) pair), or a new
    self-signed CA when `ca` is None. Returns (certificate path, key path)."""
    certificate, key = cluster.path(name + ".pem"), cluster.path(name + ".key")
    new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
               "-keyout", key, "-subj", "/CN=edgesgd-test-" + name]
    if ca is None:
        commands = [["openssl", "req", "-x509", "-days", "30", "-out", certificate] + new_key]
    else:
        request = cluster.path(name + ".csr")
        commands = [["openssl", "req", "-out", request] + new_key,
                    ["openssl", "x509", "-req", "-in", request, "-CA", ca[0], "-CAkey", ca[1],
                     "-CAcreateserial", "-days", "30", "-out", certificate]]
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True)
        check(done.returncode == 0, "openssl failed: %s" % done.stderr.strip()[-300:])
    return certificate, key


def tls(cluster):
    """TLS under the frames: a run over mutual TLS ends bit-identical to simulate (majority
    vote), the server speaks TLS 1.2+ and insists on a client certificate, and a plain-TCP
    client, a worker without TLS and a worker whose certificate another CA signed are each
    refused (counted) while the run goes on."""
    ca = make_certificates(cluster, "ca")
    node = make_certificates(cluster, "node", ca)
    rogue = make_certificates(cluster, "rogue_node", make_certificates(cluster, "rogue_ca"))
    tls_flags = ["--tls-cert", node[0], "--tls-key", node[1], "--tls-ca", ca[0]]
    run = ["--workers", "2", "--rounds", "40", "--seed", "3", "--quorum", "2"] + MAJORITY
    sim_model, _ = simulate(cluster, run, "sim")
    server, port = cluster.start_server(
        DATA + run + tls_flags + ["--model-out", cluster.path("server.bin"),
                                  "--summary", cluster.path("server.json")])

    # A TLS client that presents no certificate: TLS 1.2+ is spoken, then the server refuses.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(ca[0])
    context.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw) as wrapped:
                check(wrapped.version() in ("TLSv1.2", "TLSv1.3"),
                      "server negotiated %s" % wrapped.version())
                wrapped.recv(1)  # TLS 1.3 reports the missing certificate on the first read
        except (ssl.SSLError, ConnectionResetError, socket.timeout):
            pass
    # Plain bytes where a TLS hello belongs.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as plain:
        plain.sendall(initiator_hello(1, os.urandom(16)))
        check(closed_by_server(plain, 10), "a plain-TCP client was not disconnected")
    refused = [
        cluster.start("plain_worker", ["worker", "--connect", "127.0.0.1:%d" % port, "--id", "1",
                                       "--give-up-s", "2", "--reconnect-max-s", "0.2",
                                       "--quiet"] + DATA),
        cluster.start("rogue_worker", ["worker", "--connect", "127.0.0.1:%d" % port, "--id", "2",
                                       "--give-up-s", "2", "--reconnect-max-s", "0.2",
                                       "--tls-cert", rogue[0], "--tls-key", rogue[1],
                                       "--tls-ca", ca[0], "--quiet"] + DATA)]
    for worker in refused:
        cluster.wait(worker, timeout=30, expect=1)
    check(server.poll() is None, "the server stopped serving: %s" % cluster.tail("server"))

    workers = [cluster.start_worker(port, w, tls_flags) for w in (1, 2)]
    cluster.wait(server)
    for worker in workers:
        cluster.wait(worker, timeout=20)
    network = cluster.summary("server.json")["network"]
    check(network["tls_failures"] >= 4,
          "expected at least 4 refused handshakes, the summary counts %d" %
          network["tls_failures"])
    check(read_model(cluster.path("server.bin")) == sim_model,
          "the run over TLS is not bit-identical to simulate")
    print("TLS run bit-identical to simulate; %d handshakes refused" % network["tls_failures"])


def peer_addresses(ports):
    return ",".join("127.0.0.1:%d" % p for p in ports)


def free_ports(count):
    """Ports for the peers (each peer must know every address before any of them starts)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_peers(cluster, ports, rounds, deadline_s, algorithm=()):
    """`algorithm`: extra flags choosing the gossip algorithm (default D-PSGD). Each peer writes
    its final model to peerI.model."""
    peers = {}
    for i in range(1, len(ports) + 1):
        peers[i] = cluster.start(
            "peer%d" % i,
            ["peer", "--id", str(i), "--listen", "127.0.0.1:%d" % ports[i - 1],
             "--peers", peer_addresses(ports), "--topology", "ring", "--rounds", str(rounds),
             "--round-deadline-s", str(deadline_s), "--reconnect-max-s", "0.2", "--lr", "0.1",
             "--quiet", "--summary", cluster.path("peer%d.json" % i),
             "--metrics", cluster.path("peer%d.csv" % i),
             "--model-out", cluster.path("peer%d.model" % i)] + DATA
            + ["--workers", str(len(ports))] + list(algorithm))
    return peers


def consensus_distance(cluster, ids):
    """mean_i ||x_i - mean x||^2 over the final models of peers `ids`."""
    models = []
    for i in ids:
        with open(cluster.path("peer%d.model" % i), "rb") as f:
            data = f.read()
        models.append(struct.unpack("<%df" % (len(data) // 4), data))
    dimension = len(models[0])
    mean = [sum(model[k] for model in models) / len(models) for k in range(dimension)]
    return sum(sum((model[k] - mean[k]) ** 2 for k in range(dimension))
               for model in models) / len(models)


# Below a DATA peer's largest frame (an exchange of 410 parameters), above a control frame.
GOSSIP_ANNOUNCED_BYTES = 1500

CHOCO_TOP_K = ["--gossip", "choco", "--codec", "top_k", "--k-ratio", "0.1"]


def gossip_ring(cluster, algorithm=()):
    """8 peers on a ring run D-PSGD (or the given algorithm) to completion."""
    peers = start_peers(cluster, free_ports(8), 40, 5, algorithm)
    for i, peer in peers.items():
        cluster.wait(peer)
    for i in peers:
        summary = cluster.summary("peer%d.json" % i)
        check(summary["final"]["round"] == 40, "peer %d did not complete" % i)
        check(summary["final"]["accuracy"] > 0.7, "peer %d trained to only %s" %
              (i, summary["final"]["accuracy"]))
    return [cluster.summary("peer%d.json" % i) for i in peers]


def gossip_first_record(cluster):
    """A gossip peer with keys holds a connection that has proved nothing to a control frame's
    bytes, although its neighbours send models: a hello naming a real neighbour followed by a
    record announcing an exchange-sized payload is closed at once, while the ring, whose
    diallers open with an empty key confirmation, trains to completion. A key holder's
    confirmation is not a first frame: a connection that sends nothing after it is still closed
    at the hello deadline."""
    ports = free_ports(4)
    peers = start_peers(cluster, ports, 40, 5, ["--hello-timeout-s", "2"])
    deadline = time.time() + 20
    while True:
        try:
            probe = socket.create_connection(("127.0.0.1", ports[0]), timeout=5)
            probe.close()
            break
        except OSError:
            check(time.time() < deadline, "peer 1 never listened")
            time.sleep(0.1)

    def hello(nonce):
        sock = socket.create_connection(("127.0.0.1", ports[0]), timeout=5)
        sock.sendall(initiator_hello(2, nonce))
        return sock, recv_exact(sock, 64)

    unproven, _ = hello(os.urandom(16))
    unproven.sendall(struct.pack("<IIQ", GOSSIP_ANNOUNCED_BYTES, 2, 0))
    # Well within the hello deadline, which would close it anyway.
    check(closed_by_server(unproven, 1), "a record of %d bytes announced before any proof was "
          "awaited" % GOSSIP_ANNOUNCED_BYTES)
    unproven.close()
    nonce = os.urandom(16)
    confirmed, reply = hello(nonce)
    record_key = auth_key(cluster.keys[2], 1, 2, nonce, reply[16:32])
    header = struct.pack("<IIQ", 0, 2, 0)
    confirmed.sendall(header + hmac.new(record_key, header, hashlib.sha256).digest())
    check(closed_by_server(confirmed, 4),
          "a connection that confirmed its key and sent no frame outlived the hello deadline")
    confirmed.close()
    for peer in peers.values():
        cluster.wait(peer)
    for i in peers:
        check(cluster.summary("peer%d.json" % i)["final"]["round"] == 40,
              "peer %d did not complete" % i)
    print("gossip first record: an unproven %d-byte record closed; the ring completed" %
          GOSSIP_ANNOUNCED_BYTES)


def gossip_ring_detag(cluster):
    """The same ring with DeTAG: accelerated gossip over the recipe's R exchange steps."""
    summaries = gossip_ring(cluster, ["--gossip", "detag"])
    for summary in summaries:
        check(summary["gossip"]["algorithm"] == "detag" and summary["gossip"]["gossip_steps"] >= 2,
              "not a DeTAG run: %s" % summary["gossip"])


def compressed_gossip_ring(cluster, name, flags, max_bits):
    """The ring with a compressor against public copies (CHOCO or BEER), sending under
    `max_bits` bits per coordinate. Deltas a peer sends before its links are up are lost; its
    neighbours repair their copies of it from its own copy, and every peer's model ends close to
    the others'."""
    summaries = gossip_ring(cluster, flags)
    for summary in summaries:
        gossip = summary["gossip"]
        check(gossip["algorithm"] == name and gossip["codec"] == "top_k",
              "not a %s run: %s" % (name, gossip))
        check(summary["final"]["bits_per_coord"] < max_bits, "%s sent %s bits per coordinate" %
              (name, summary["final"]["bits_per_coord"]))
        check(gossip["copies_applied"] >= (1 if gossip["out_of_order_deltas"] else 0),
              "peer %s saw deltas out of order but never repaired a copy: %s" %
              (summary["peer"], gossip))
    distance = consensus_distance(cluster, range(1, 9))
    print("gossip_ring_%s: final consensus distance %.4g; copies repaired %d" %
          (name, distance, sum(s["gossip"]["copies_applied"] for s in summaries)))
    check(distance < 1.0, "the peers did not agree: consensus distance %.4g" % distance)


def gossip_ring_choco(cluster):
    """CHOCO: top_k deltas of the model, a fraction of the bits."""
    compressed_gossip_ring(cluster, "choco", CHOCO_TOP_K, 8)


BEER_TOP_K = ["--gossip", "beer", "--codec", "top_k", "--k-ratio", "0.1"]


def gossip_ring_beer(cluster):
    """BEER: top_k deltas of the model and of the gradient tracker (a CopyRequest names the
    vector); two compressed vectors per round, still well below one dense one (32 bits)."""
    compressed_gossip_ring(cluster, "beer", BEER_TOP_K, 16)


def gossip_peer_killed(cluster, algorithm=()):
    """One of 8 peers is killed mid-run: its neighbours continue and everyone else completes."""
    rounds, deadline_s = 300, 0.2
    peers = start_peers(cluster, free_ports(8), rounds, deadline_s, algorithm)
    cluster.wait_rows("peer1.csv", 20, peers[1])
    peers[5].send_signal(signal.SIGKILL)
    peers[5].wait()
    # A dead neighbour whose loss the neighbours' links did not see (killed before both of its
    # connections were up) costs each later round one deadline: allow for that worst case.
    for i, peer in peers.items():
        if i != 5:
            cluster.wait(peer, timeout=RUN_TIMEOUT_S + rounds * deadline_s)
    for neighbour in (4, 6):
        gossip = cluster.summary("peer%d.json" % neighbour)["gossip"]
        check(gossip["neighbours_lost"] + gossip["neighbours_missed"] >= 1,
              "peer %d did not notice its neighbour 5 was gone" % neighbour)
    for i in peers:
        if i != 5:
            check(cluster.summary("peer%d.json" % i)["final"]["round"] == 300,
                  "peer %d did not complete" % i)
    survivors = [i for i in peers if i != 5]
    distance = consensus_distance(cluster, survivors)
    print("%s: final consensus distance of the 7 survivors %.4g" %
          (os.path.basename(cluster.work), distance))
    check(math.isfinite(distance) and distance < 1.0,
          "the survivors did not agree: consensus distance %.4g" % distance)


def gossip_peer_killed_choco(cluster):
    """The same with CHOCO top_k over authenticated frames: peer 5's neighbours re-weight (its
    weight moves onto their diagonals) and keep their other copies in step."""
    gossip_peer_killed(cluster, CHOCO_TOP_K)
    for neighbour in (4, 6):
        summary = cluster.summary("peer%d.json" % neighbour)
        check(summary["gossip"]["algorithm"] == "choco", "not a CHOCO run")


def async_fleet(cluster):
    """Buffered asynchronous aggregation: 8 workers slowed 1x to 10x, versions of K = 3 updates.
    No version waits for the slow: the fastest worker sends at least twice the updates of the
    slowest. One worker killed with -9 and restarted rejoins, and the run completes."""
    slowdowns = {1: 1, 2: 1, 3: 2, 4: 3, 5: 4, 6: 6, 7: 8, 8: 10}
    server, port = cluster.start_server(
        SLOW_DATA + ["--workers", "8", "--rounds", "1500", "--buffer", "3", "--batch", "256",
                     "--eval-every", "50", "--metrics", cluster.path("server.csv"),
                     "--summary", cluster.path("server.json"), "--idle-timeout-s", "5"])
    workers = {}
    for w, slowdown in slowdowns.items():
        workers[w] = cluster.start(
            "worker%d" % w, ["worker", "--connect", "127.0.0.1:%d" % port, "--id", str(w),
                             "--slowdown", str(slowdown), "--reconnect-max-s", "0.2",
                             "--give-up-s", "30"] + SLOW_DATA)
    cluster.wait_rows("server.csv", 40, server)
    workers[5].send_signal(signal.SIGKILL)
    workers[5].wait()
    cluster.wait_rows("server.csv", cluster.rows("server.csv") + 20, server)
    workers[5] = cluster.start(
        "worker5", ["worker", "--connect", "127.0.0.1:%d" % port, "--id", "5", "--slowdown",
                    str(slowdowns[5]), "--reconnect-max-s", "0.2", "--give-up-s", "30"] + SLOW_DATA)
    check(server.poll() is None and cluster.rows("server.csv") < 1300,
          "the run ended before the worker was restarted: lengthen it")
    cluster.wait(server)
    for w in slowdowns:
        cluster.wait(workers[w], timeout=20)
    summary = cluster.summary("server.json")
    check(summary["final"]["round"] == 1500, "the run did not complete")
    check(summary["async"]["buffer"] == 3, "not a buffered run: %s" % summary.get("async"))
    check(summary["network"]["rejoins"] >= 1, "the restarted worker did not rejoin")
    check(summary["final"]["accuracy"] > 0.5, "training failed: %s" % summary["final"])
    # Workers 1 and 2 run at full speed, worker 8 ten times slower: had versions waited for the
    # slow, every worker would have sent about as many updates. Of the two fast ones, the one the
    # loaded machine's scheduler favoured counts (on 2 cores, 8 workers and a server compete).
    accepted = summary["network"]["updates_by_worker"]
    fastest = max(accepted["1"], accepted["2"])
    check(fastest >= 2 * accepted["8"],
          "the fastest worker had %d updates accepted, the slowest %d: versions waited for the "
          "slow (%s)" % (fastest, accepted["8"], accepted))


SCENARIOS = {
    "matches_simulate": matches_simulate,
    "worker_keeps_its_shard": worker_keeps_its_shard,
    "private_training": private_training,
    "secure_training": secure_training,
    "signed_secure_training": signed_secure_training,
    "kill_worker": kill_worker,
    "server_resume": server_resume,
    "resume_refuses_changes": resume_refuses_changes,
    "hostile_clients": hostile_clients,
    "worker_receive_limit": worker_receive_limit,
    "auth_attacks": auth_attacks,
    "unauthenticated_flood": unauthenticated_flood,
    "plain_flood": plain_flood,
    "descriptor_exhaustion": descriptor_exhaustion,
    "slow_worker": slow_worker,
    "async_fleet": async_fleet,
    "server_vanishes": server_vanishes,
    "mismatched_worker": mismatched_worker,
    "per_device_keys": per_device_keys,
    "gossip_ring": gossip_ring,
    "gossip_peer_killed": gossip_peer_killed,
    "gossip_ring_detag": gossip_ring_detag,
    "gossip_first_record": gossip_first_record,
    "gossip_ring_choco": gossip_ring_choco,
    "gossip_ring_beer": gossip_ring_beer,
    "gossip_peer_killed_choco": gossip_peer_killed_choco,
    "tls": tls,
}


def run(scenarios, label):
    """The command line of a scenario script: EDGESGD WORK_DIR SCENARIO; returns the exit code."""
    if len(sys.argv) != 4 or sys.argv[3] not in scenarios:
        print("usage: %s EDGESGD WORK_DIR {%s}" % (os.path.basename(sys.argv[0]),
                                                  "|".join(scenarios)))
        return 2
    edgesgd, work, name = sys.argv[1:]
    cluster = Cluster(edgesgd, os.path.join(work, name))
    start = time.time()
    try:
        scenarios[name](cluster)
    except Failure as failure:
        print("%s %s: FAILED: %s" % (label, name, failure))
        return 1
    finally:
        cluster.close()
    print("%s %s: passed in %.1f s" % (label, name, time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(run(SCENARIOS, "tcp"))
