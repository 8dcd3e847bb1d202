#!/usr/bin/python3
"""A worker on a serial line, reaching the server through `edgesgd bridge`: real processes.

The serial line is a TCP connection standing in for a UART (the worker listens with
--listen-serial, as an emulator's UART would; the bridge connects with --connect-serial), and a
relay between the two damages the bytes: it drops, corrupts and repeats some of them. Usage:
    serial_bridge_test.py EDGESGD WORK_DIR SCENARIO
Exit status 0 on success; on failure one line saying what went wrong (plus the logs' tails).
"""

import os
import random
import re
import signal
import socket
import sys
import threading
import time

from tcp_cluster_test import (DATA, MAJORITY, SLOW_DATA, check, free_ports, read_model, run,
                              simulate)


class DamagingLine:
    """Relays bytes between the bridge (which connects here) and the worker's serial port,
    dropping, corrupting or repeating each byte with probability `rate` / 3 apiece, and also the
    bytes at the offsets `damage_at` of each direction's stream (in turn dropped, corrupted and
    repeated: a few faults in known places, for lines whose frames are too long to survive a
    steady rate). A new connection from the bridge starts a new relay (a restarted bridge)."""

    def __init__(self, device_port, rate, seed, damage_at=()):
        self.device_port = device_port
        self.rate = rate
        self.damage_at = sorted(damage_at)
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.damaged = 0
        self.relayed = 0
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            try:
                bridge, _ = self.listener.accept()
            except OSError:
                return
            try:
                device = socket.create_connection(("127.0.0.1", self.device_port), timeout=5)
                device.settimeout(None)
            except OSError:
                bridge.close()
                continue
            for source, sink in ((bridge, device), (device, bridge)):
                threading.Thread(target=self.relay, args=(source, sink), daemon=True).start()

    def fault(self, offset):
        """0 (none), 1 (drop), 2 (corrupt) or 3 (repeat) for the byte at `offset`."""
        if offset in self.damage_at:
            return 1 + self.damage_at.index(offset) % 3
        roll = self.random.random()
        return 1 + int(roll * 3 / self.rate) if roll < self.rate else 0

    def damage(self, data, offset):
        out = bytearray()
        with self.lock:
            for i, byte in enumerate(data):
                kind = self.fault(offset + i)
                if kind:
                    self.damaged += 1
                if kind == 2:
                    out.append(byte ^ (1 << self.random.randrange(8)))
                elif kind == 3:
                    out += bytes([byte, byte])
                elif kind == 0:
                    out.append(byte)
            self.relayed += len(data)
        return bytes(out)

    def relay(self, source, sink):
        offset = 0
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(self.damage(data, offset))
                offset += len(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def start_serial_worker(cluster, worker_id, port, data, extra=(), security=None):
    """The line is authenticated with the worker's key from the cluster's key file (or
    `security`), which the bridge holds too."""
    return cluster.start("worker%d" % worker_id,
                         ["--listen-serial", "127.0.0.1:%d" % port, "--id", str(worker_id),
                          "--serial-retransmit-ms", "50", "--serial-bytes-per-s", "1e7"] + data +
                         list(extra) + (security or cluster.security),
                         program=[cluster.edgesgd, "worker"])


def start_bridge(cluster, worker_id, line_port, server_port, name=None):
    return cluster.start(name or "bridge%d" % worker_id,
                         ["bridge", "--connect-serial", "127.0.0.1:%d" % line_port, "--connect",
                          "127.0.0.1:%d" % server_port, "--id", str(worker_id),
                          "--serial-retransmit-ms", "50", "--serial-bytes-per-s", "1e7",
                          "--reconnect-max-s", "0.2",
                          "--give-up-s", "30"] + cluster.security)


def bridge_counters(cluster, name):
    with open(cluster.path(name + ".log")) as f:
        found = re.findall(r"edgesgd bridge \d+: (\d+) frames to the device, (\d+) to the server; "
                           r"(\d+) device restarts.* (\d+) line closures; line: (\d+) "
                           r"retransmissions, (\d+) duplicates, (\d+) damaged frames .* skipped, "
                           r"(\d+) failed authentication", f.read())
    check(found, "%s printed no summary: %s" % (name, cluster.tail(name)))
    keys = ("to_device", "to_server", "device_restarts", "line_closures", "retransmissions",
            "duplicates", "damaged", "auth_rejected")
    return dict(zip(keys, (int(v) for v in found[-1])))


def mixed_run(cluster, args, name, rate):
    """Worker 1 over TCP, worker 2 on a damaged serial line through the bridge."""
    server, port = cluster.start_server(
        ["--model-out", cluster.path(name + ".bin"), "--summary", cluster.path(name + ".json")] +
        DATA + args, name=name)
    (device_port,) = free_ports(1)
    serial_worker = start_serial_worker(cluster, 2, device_port, DATA)
    line = DamagingLine(device_port, rate, seed=len(name))
    bridge = start_bridge(cluster, 2, line.port, port, name=name + "_bridge")
    cluster.start_worker(port, 1)
    cluster.wait(server)
    cluster.wait(bridge)
    cluster.wait(serial_worker)
    return read_model(cluster.path(name + ".bin")), cluster.summary(name + ".json"), line


def serial_worker_matches(cluster):
    """A worker behind the bridge, on a line that damages 0.05 % of its bytes, trains as if it
    were on TCP: majority vote ends bit-identical to the simulator (votes are integers, so
    arrival order does not matter), mean aggregation within 1e-4 of it; damage is detected,
    counted and repaired by retransmission."""
    common = ["--workers", "2", "--rounds", "30", "--seed", "7", "--quorum", "2"]
    majority = common + MAJORITY
    sim_model, _ = simulate(cluster, majority, "sim_majority")
    model, summary, line = mixed_run(cluster, majority, "serial_majority", 0.0005)
    check(model == sim_model, "majority vote through the bridge is not bit-identical to simulate")
    check(summary["final"]["round"] == 30, "the run did not complete: %s" % summary["final"])
    counters = bridge_counters(cluster, "serial_majority_bridge")
    check(line.damaged > 0, "the line damaged nothing")
    check(counters["damaged"] + counters["retransmissions"] > 0,
          "the bridge saw no damage on a line that damaged %d bytes" % line.damaged)
    check(counters["to_server"] >= 30, "only %d frames reached the server" % counters["to_server"])

    mean = common + ["--codec", "top_k", "--k-ratio", "0.1", "--feedback", "ef", "--lr", "0.1"]
    sim_model, sim_summary = simulate(cluster, mean, "sim_mean")
    model, summary, line = mixed_run(cluster, mean, "serial_mean", 0.0005)
    worst = max(abs(a - b) / (1 + abs(a)) for a, b in zip(sim_model, model))
    check(worst <= 1e-4, "mean aggregation through the bridge differs from simulate by %g" % worst)
    check(abs(sim_summary["final"]["accuracy"] - summary["final"]["accuracy"]) <= 0.005,
          "accuracy %s vs simulate's %s" % (summary["final"]["accuracy"],
                                            sim_summary["final"]["accuracy"]))
    print("majority: bit-identical; mean: within %g; %d of %d bytes damaged, bridge: %s" %
          (worst, line.damaged, line.relayed, counters))


def serial_restarts(cluster):
    """The bridge killed with -9 and restarted, then the device itself (its port closes, as an
    emulator's does): each time the device joins again and the run completes."""
    server, port = cluster.start_server(
        SLOW_DATA + ["--workers", "2", "--rounds", "150", "--quorum", "1", "--batch", "256",
                     "--round-deadline-s", "0.5", "--eval-every", "50",
                     "--metrics", cluster.path("server.csv"),
                     "--summary", cluster.path("server.json"), "--idle-timeout-s", "5"])
    (device_port,) = free_ports(1)
    slow = ["--slowdown", "20"]
    device = start_serial_worker(cluster, 2, device_port, SLOW_DATA, slow)
    line = DamagingLine(device_port, 0.0001, seed=3)
    bridge = start_bridge(cluster, 2, line.port, port, name="bridge_a")
    # The TCP worker paces the run (about 50 ms a round), so it outlasts the restarts even
    # while the device is away and rounds close without it.
    cluster.start("worker1", ["worker", "--connect", "127.0.0.1:%d" % port, "--id", "1",
                              "--reconnect-max-s", "0.2", "--give-up-s", "30", "--quiet",
                              "--slowdown", "100"] + SLOW_DATA)
    cluster.wait_rows("server.csv", 20, server)
    bridge.send_signal(signal.SIGKILL)
    bridge.wait()
    cluster.wait_rows("server.csv", cluster.rows("server.csv") + 5, server)
    bridge = start_bridge(cluster, 2, line.port, port, name="bridge_b")
    cluster.wait_rows("server.csv", cluster.rows("server.csv") + 20, server)
    device.send_signal(signal.SIGKILL)
    device.wait()
    device = start_serial_worker(cluster, 2, device_port, SLOW_DATA, slow)
    check(server.poll() is None and cluster.rows("server.csv") < 130,
          "the run ended before the device was restarted: lengthen it")
    cluster.wait(server)
    cluster.wait(bridge)
    cluster.wait(device)
    summary = cluster.summary("server.json")
    check(summary["final"]["round"] == 150, "the run did not complete")
    check(summary["network"]["updates_by_worker"]["2"] > 0, "no update from the serial worker")
    check(summary["network"]["rejoins"] >= 2,
          "the device did not rejoin after each restart: %s" % summary["network"])
    counters = bridge_counters(cluster, "bridge_b")
    check(counters["line_closures"] >= 1, "the bridge did not see the device's line close")
    with open(cluster.path("worker2.log")) as f:
        updates = re.findall(r"done: (\d+) updates sent", f.read())
    check(updates and int(updates[-1]) > 0, "the restarted device sent no update: %s" %
          cluster.tail("worker2"))
    print("rejoins %d; restarted device sent %s updates; bridge: %s" %
          (summary["network"]["rejoins"], updates[-1], counters))


def wait_for_log(cluster, name, text, count, process, timeout=20):
    """Waits until `name`'s log holds `text` `count` times; returns how many it holds."""
    deadline = time.time() + timeout
    while True:
        with open(cluster.path(name + ".log")) as f:
            found = f.read().count(text)
        if found >= count:
            return found
        check(process.poll() is None, "%s exited: %s" % (process.name, cluster.tail(process.name)))
        check(time.time() < deadline, "%s logged %r %d times, not %d: %s" %
              (name, text, found, count, cluster.tail(name)))
        time.sleep(0.05)


def serial_wrong_key(cluster):
    """Devices without the key the bridge holds for its id never reach the server, and retry
    about once a second: first one holding another device's key (the bridge refuses its hello),
    then one with a key that differs from the bridge's (the device refuses the bridge's answer).
    The server waits for its second worker meanwhile: no round starts. The same device with the
    right key then authenticates, the run starts and completes; the bridge is the same process
    throughout."""
    server, port = cluster.start_server(
        DATA + ["--workers", "2", "--rounds", "20", "--quorum", "2", "--join-timeout-s", "120",
                "--metrics", cluster.path("server.csv"),
                "--summary", cluster.path("server.json")])
    (device_port,) = free_ports(1)
    bridge = start_bridge(cluster, 2, device_port, port)
    cluster.start("worker1", ["worker", "--connect", "127.0.0.1:%d" % port, "--id", "1",
                              "--reconnect-max-s", "0.2", "--give-up-s", "60", "--quiet"] + DATA)

    impostor = start_serial_worker(cluster, 3, device_port, DATA)
    bridge_refusals = wait_for_log(cluster, "bridge2", "failed authentication (another device", 2,
                                   bridge)
    impostor.send_signal(signal.SIGKILL)
    impostor.wait()

    wrong_keys = cluster.path("wrong_keys")
    with open(os.open(wrong_keys, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write("2 %s\n" % bytes(b ^ 0x5A for b in cluster.keys[2]).hex())
    device = start_serial_worker(cluster, 2, device_port, DATA, security=["--keys", wrong_keys])
    device_refusals = wait_for_log(cluster, "worker2", "the gateway failed authentication", 2,
                                   device)
    device.send_signal(signal.SIGKILL)
    device.wait()
    os.rename(cluster.path("worker2.log"), cluster.path("worker2_wrong_key.log"))
    check(server.poll() is None and cluster.rows("server.csv") == 0,
          "the run started without the device: %s" % cluster.tail("server"))

    device = start_serial_worker(cluster, 2, device_port, DATA)
    cluster.wait(server)
    cluster.wait(bridge)
    cluster.wait(device)
    summary = cluster.summary("server.json")
    check(summary["final"]["round"] == 20, "the run did not complete")
    counters = bridge_counters(cluster, "bridge2")
    check(counters["auth_rejected"] >= bridge_refusals,
          "the bridge counted %d refusals and logged %d" % (counters["auth_rejected"],
                                                           bridge_refusals))
    updates = summary["network"]["updates_by_worker"]
    check(updates.get("2", 0) == 20, "the device with the right key sent %s updates, not 20: %s" %
          (updates.get("2", 0), updates))
    print("the bridge refused another device's key %d times, the device the bridge's answer %d "
          "times; then %d updates with the right key; bridge: %s" %
          (bridge_refusals, device_refusals, updates["2"], counters))


def serial_impostor_gets_nothing(cluster):
    """The real device goes away mid-run, so the server's frames for it wait in its bridge; then
    a device holding another device's key takes the line. The bridge refuses its hello and sends
    it nothing, the waiting frames included: the impostor never hears a record (it would log
    that the gateway failed authentication, since it still waits for the bridge's hello)."""
    server, port = cluster.start_server(
        SLOW_DATA + ["--workers", "2", "--rounds", "300", "--quorum", "1", "--batch", "256",
                     "--round-deadline-s", "0.3", "--eval-every", "100",
                     "--metrics", cluster.path("server.csv")])
    (device_port,) = free_ports(1)
    device = start_serial_worker(cluster, 2, device_port, SLOW_DATA, ["--slowdown", "20"])
    bridge = start_bridge(cluster, 2, device_port, port)
    cluster.start("worker1", ["worker", "--connect", "127.0.0.1:%d" % port, "--id", "1",
                              "--reconnect-max-s", "0.2", "--give-up-s", "30", "--quiet",
                              "--slowdown", "100"] + SLOW_DATA)
    cluster.keep_running(bridge)
    cluster.wait_rows("server.csv", 10, server)
    device.send_signal(signal.SIGKILL)
    device.wait()
    # Rounds go on without the device; their broadcasts and re-sends for it queue in the bridge.
    cluster.wait_rows("server.csv", cluster.rows("server.csv") + 10, server)
    impostor = start_serial_worker(cluster, 3, device_port, SLOW_DATA)
    refusals = wait_for_log(cluster, "bridge2", "failed authentication (another device", 3,
                            bridge)
    with open(cluster.path("worker3.log")) as f:
        heard = f.read().count("the gateway failed authentication")
    check(heard == 0, "after refusing its hello the bridge sent the impostor %d records: %s" %
          (heard, cluster.tail("worker3")))
    check(server.poll() is None, "the run ended before the impostor was refused: lengthen it")
    impostor.send_signal(signal.SIGKILL)
    print("the bridge refused the impostor's hello %d times and sent it nothing" % refusals)


SCENARIOS = {
    "serial_worker_matches": serial_worker_matches,
    "serial_wrong_key": serial_wrong_key,
    "serial_impostor_gets_nothing": serial_impostor_gets_nothing,
    "serial_restarts": serial_restarts,
}


if __name__ == "__main__":
    sys.exit(run(SCENARIOS, "serial"))
