#!/usr/bin/python3
"""A mixed fleet trains Fashion-MNIST softmax regression together: an x86-64 `edgesgd server`,
two x86-64 workers, one aarch64 worker under qemu-user, and two Cortex-M4 workers
(edgesgd_mcu_worker_uart under qemu-system-arm), each microcontroller on its emulated UART
bridged to the server by `edgesgd bridge`. The first microcontroller's line damages six bytes
each way (dropped, corrupted or repeated; a steady rate would leave a 31 KB model broadcast no
chance to get through); the link detects, counts and repairs them. A third of
the way through, the second microcontroller is powered off and booted again (qemu killed and
restarted): its bridge reconnects, the device joins again and the run completes. The server must count updates from every device, and the final accuracy must
be within 2 points of an all-native run of the same
configuration (the microcontrollers train on their own 2,048-image shard in flash, not the
shard a native worker of their id would draw, so the models are close, not equal).

Usage: mixed_fleet_test.py HOST_EDGESGD AARCH64_EDGESGD MCU_IMAGE WORK_DIR
Exits 77 (skipped) with a reason when qemu or the dataset is missing.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tcp"))
import tcp_cluster_test as tcp  # noqa: E402
from serial_bridge_test import DamagingLine, bridge_counters  # noqa: E402

SKIP = 77
AARCH64 = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]
DATASET = "/usr/share/datasets/fashion-mnist"
WORKERS = 5
MCUS = (4, 5)
ROUNDS = 60
DATA = ["--task", "softmax", "--data", "fashion-mnist"]
# Rounds wait for every device: with a smaller quorum the native workers close each round before
# a microcontroller's update is through its line, and the device's updates are all stale. The
# deadline (when a device is silent) stays above a whole model's time on the line (about 4 s).
RUN = ["--workers", str(WORKERS), "--rounds", str(ROUNDS), "--seed", "5",
       "--codec", "top_k", "--k-ratio", "0.01", "--feedback", "ef", "--lr", "0.5",
       "--downlink", "aggregate", "--quorum", str(WORKERS), "--round-deadline-s", "10",
       "--eval-every", "20"]
TOLERANCE = 0.02


def start_mcu(cluster, device, port, name):
    """qemu-system-arm with the image, its UART0 on a TCP port the bridge connects to; the
    device's key from the cluster's key file is provisioned on its command line, so the line to
    the bridge is authenticated."""
    log = open(cluster.path(name + ".log"), "w")
    process = subprocess.Popen(
        ["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-monitor", "none",
         "-semihosting-config", "enable=on,target=native",
         "-serial", "tcp:127.0.0.1:%d,server=on,wait=off,nodelay=on" % port,
         "-kernel", cluster.mcu_image,
         "-append", "--id %d --key %s --entropy %s" % (device, cluster.keys[device].hex(),
                                                     os.urandom(32).hex())],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    process.name = name
    cluster.processes.append(process)
    return process


def start_bridge(cluster, device, line_port, server_port):
    """The line's speed is given as 8,000 B/s, below qemu's UART (15-30 KB/s, less on a loaded
    machine): a bridge that expects a frame to be through sooner than it is sends it again, and
    on a slow emulator the copies queue up ahead of every later frame."""
    return cluster.start("bridge%d" % device,
                         ["bridge", "--connect-serial", "127.0.0.1:%d" % line_port, "--connect",
                          "127.0.0.1:%d" % server_port, "--id", str(device),
                          "--serial-bytes-per-s", "8000",
                          "--reconnect-max-s", "0.2", "--give-up-s", "60"] + cluster.security)


def start_worker(cluster, port, device, program=None):
    return cluster.start("worker%d" % device,
                         ["worker", "--connect", "127.0.0.1:%d" % port, "--id", str(device),
                          "--reconnect-max-s", "0.2", "--give-up-s", "60", "--quiet"] + DATA,
                         program=program)


def start_server(cluster, name):
    return cluster.start_server(DATA + RUN + ["--summary", cluster.path(name + ".json"),
                                       "--metrics", cluster.path(name + ".csv")], name=name)


def all_native(cluster):
    server, port = start_server(cluster, "native")
    workers = [start_worker(cluster, port, w) for w in range(1, WORKERS + 1)]
    cluster.keep_running(*workers)
    cluster.wait(server, timeout=300)
    for worker in workers:
        cluster.wait(worker, timeout=30)
    return cluster.summary("native.json")


def mixed(cluster, aarch64):
    server, port = start_server(cluster, "mixed")
    cluster.keep_running(start_worker(cluster, port, 1), start_worker(cluster, port, 2),
                         start_worker(cluster, port, 3, program=AARCH64 + [aarch64]))
    line_ports = dict(zip(MCUS, tcp.free_ports(len(MCUS))))
    mcus = {d: start_mcu(cluster, d, line_ports[d], "mcu%d" % d) for d in MCUS}
    damaged = DamagingLine(line_ports[MCUS[0]], 0, seed=1,
                           damage_at=(1500, 4000, 9000, 16000, 25000, 40000))
    bridge_ports = {MCUS[0]: damaged.port, MCUS[1]: line_ports[MCUS[1]]}
    bridges = {d: start_bridge(cluster, d, bridge_ports[d], port) for d in MCUS}
    cluster.keep_running(*mcus.values(), *bridges.values())
    # Power-cycle the last microcontroller a third of the way through.
    cluster.wait_rows("mixed.csv", ROUNDS // 3, server, timeout=240)
    victim = MCUS[-1]
    cluster.release(mcus[victim])
    mcus[victim].send_signal(signal.SIGKILL)
    mcus[victim].wait()
    os.rename(cluster.path("mcu%d.log" % victim), cluster.path("mcu%d_first_boot.log" % victim))
    time.sleep(1)
    tcp.check(server.poll() is None and cluster.rows("mixed.csv") < ROUNDS - 10,
              "the run ended before the microcontroller was restarted")
    mcus[victim] = start_mcu(cluster, victim, line_ports[victim], "mcu%d" % victim)
    cluster.keep_running(mcus[victim])
    cluster.wait(server, timeout=300)
    fleet = cluster.summary("mixed.json")
    # Printed before any check, so that a failing run shows them too.
    print("mixed fleet: accuracy %.4f; updates by device %s; stale updates dropped %d; "
          "rejoins %d" % (fleet["final"]["accuracy"], fleet["network"]["updates_by_worker"],
                          fleet["network"]["stale_updates_dropped"], fleet["network"]["rejoins"]))
    for d in MCUS:
        cluster.wait(bridges[d], timeout=60)
        cluster.wait(mcus[d], timeout=60)
    counters = bridge_counters(cluster, "bridge%d" % MCUS[0])
    tcp.check(damaged.damaged > 0 and counters["damaged"] + counters["retransmissions"] > 0,
              "the damaged line (%d bytes damaged) cost no retransmission: %s" %
              (damaged.damaged, counters))
    return fleet, counters


def mcu_rounds(cluster, device):
    with open(cluster.path("mcu%d.log" % device)) as f:
        text = f.read()
    tcp.check("EDGESGD-MCU PASS" in text, "mcu%d did not pass: %s" % (device, cluster.tail(
        "mcu%d" % device)))
    tcp.check("line authenticated" in text and "failed authentication 0;" in text,
              "mcu%d's line was not authenticated, or failed: %s" % (device, cluster.tail(
                  "mcu%d" % device)))
    trained = re.findall(r"rounds trained (\d+)", text)
    tcp.check(trained, "mcu%d reported no rounds: %s" % (device, cluster.tail("mcu%d" % device)))
    return int(trained[-1])


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    host, aarch64, image, work = sys.argv[1:]
    for program in ("qemu-system-arm", "qemu-aarch64"):
        if shutil.which(program) is None:
            print("mixed fleet: skipped: %s is not installed" % program)
            return SKIP
    if not os.path.exists(os.path.join(DATASET, "train-images-idx3-ubyte.gz")):
        print("mixed fleet: skipped: Fashion-MNIST is not in %s (dataset-fashion-mnist)" % DATASET)
        return SKIP
    for path in (host, aarch64, image):
        if not os.path.exists(path):
            print("mixed fleet: skipped: %s is not built" % path)
            return SKIP
    cluster = tcp.Cluster(host, work)
    cluster.mcu_image = image
    start = time.time()
    try:
        native = all_native(cluster)
        fleet, damage = mixed(cluster, aarch64)
        tcp.check(fleet["final"]["round"] == ROUNDS, "the mixed run did not complete")
        tcp.check(fleet["network"]["rejoins"] >= 1,
                  "the restarted microcontroller did not rejoin: %s" % fleet["network"])
        tcp.check(abs(native["final"]["accuracy"] - fleet["final"]["accuracy"]) <= TOLERANCE,
                  "mixed fleet accuracy %.4f vs all-native %.4f (tolerance %.2f)" %
                  (fleet["final"]["accuracy"], native["final"]["accuracy"], TOLERANCE))
        rounds = {d: mcu_rounds(cluster, d) for d in MCUS}
        for d, count in rounds.items():
            tcp.check(count > 0, "mcu%d trained no round" % d)
        updates = fleet["network"]["updates_by_worker"]
        tcp.check(all(updates.get(str(w), 0) > 0 for w in range(1, WORKERS + 1)),
                  "the server did not count updates from every device")
        print("mixed fleet: passed; all-native accuracy %.4f; microcontroller rounds %s (the "
              "second's since its reboot); damaged line: %s; %.0f s" %
              (native["final"]["accuracy"], rounds, damage, time.time() - start))
    except tcp.Failure as failure:
        print("mixed fleet: FAILED: %s" % failure)
        return 1
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
