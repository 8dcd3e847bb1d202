#!/usr/bin/env python3
"""Memory report of edgesgd's Cortex-M build, as markdown.

Reads the images of a cortex-m4 build: flash and RAM from arm-none-eabi-size, the RAM each
training image measured on qemu (static + stack peak, its "memory:" line, via run_mcu.sh), the
memory plan the edgesgd_mcu_memory_plan image computes on the target, and checks the
targets: core + wire + worker session + one registered codec within 48 KiB of flash (the
minimal worker image), a 10,000-parameter model with top_k + EF training in under 128 KiB
of RAM, a small CNN with top_k + EF training within 256 KiB, and the UART worker (four codecs,
the serial link, authentication and the UART driver) within 64 KiB of flash beyond its data
shard (measured with nm; that image needs a server, so it is sized here but not run). Also the
device side of secure aggregation: its flash and RAM from the secagg image's link map, and its
cost per round counted in instructions (qemu -icount).

  tests/embedded/memory_report.py --build build/cortex-m4 [--out memory_report.md]

Exits non-zero if an image is missing, fails its run, or prints no figures; an unmet target is
reported in the text, not as a failure (the report states facts, the image tests judge them).
"""

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_MCU = os.path.join(HERE, "run_mcu.sh")
FLASH_TARGET = 48 * 1024
UART_FLASH_TARGET = 64 * 1024  # the UART worker's flash beyond its data shard
UART_SHARD_SYMBOLS = ("kShardPixels", "kShardLabels")
RAM_TARGET = 128 * 1024
CNN_RAM_TARGET = 256 * 1024
ALIGNMENT_SLACK = 16

# (image, folder under the build tree, what it is)
IMAGES = [
    ("edgesgd_mcu_train_demo", "examples/mcu",
     "training demo: 2 WorkerSessions + ServerSession, softmax 1970 params, top_k 5% + EF, "
     "Fashion-MNIST slice in flash"),
    ("edgesgd_mcu_train_10k", "examples/mcu",
     "MLP 196-49-10 (10,153 params), top_k 2% + EF without momentum, top_k scratch lent "
     "from the gradient buffer, batch 2"),
    ("edgesgd_mcu_train_cnn", "examples/mcu",
     "CNN conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10 (1,898 params), top_k 10% "
     "+ EF, batch 4; flash holds its 4,096 + 1,024 image slice (985 KiB)"),
    ("edgesgd_mcu_worker_min", "examples/mcu",
     "one WorkerSession (top_k + EF), core + wire only, top_k the one registered codec"),
    ("edgesgd_mcu_worker_uart", "examples/mcu",
     "federated worker over UART0 (WorkerSession + serial::SessionLink, authenticated), "
     "softmax 784x10 (7,850 params), top_k, rand_k, random_block and sign registered; flash holds a "
     "28x28 shard. Needs a server, so not run here: RAM is static only"),
    ("edgesgd_mcu_smoke", "tests/embedded", "smoke test: core, no wire"),
    ("edgesgd_mcu_golden", "tests/embedded", "golden vectors: core + wire"),
    ("edgesgd_mcu_memory_plan", "tests/embedded", "memory plan printer"),
    ("edgesgd_mcu_auth", "tests/embedded", "frame authentication: HMAC-SHA256 vectors, both "
     "ends of a connection"),
    ("edgesgd_mcu_secagg", "tests/embedded", "secure aggregation: five devices and their "
     "server, two rounds (one with a drop-out), random_block 1/64 of a 203,530-parameter MLP"),
]
SECAGG_IMAGE = "edgesgd_mcu_secagg"
# The device side of secure aggregation in that image's link map: mbed TLS as compiled for the
# board, and the secagg objects other than the server's.
SECAGG_DEVICE_OBJECTS = re.compile(r"libedgesgd_mbedcrypto\.a\(|"
                                   r"libedgesgd_secagg\.a\((?!server\.)")
SECAGG_PHASE_LINE = re.compile(r"secagg device phase: (.+?) (\d+) instructions")
SECAGG_DEVICE_LINE = re.compile(
    r"secagg device: (\d+) neighbours, (\d+) words, arena (\d+) B, mbed TLS pool peak (\d+) "
    r"of (\d+) B, round (\d+) instructions")
MEASURED = {"edgesgd_mcu_train_demo", "edgesgd_mcu_train_10k", "edgesgd_mcu_train_cnn",
            "edgesgd_mcu_worker_min"}

MEMORY_LINE = re.compile(r"memory: flash (\d+) B, static RAM (\d+) B, stack peak (\d+) B, "
                         r"RAM (\d+) B")
ELAPSED_LINE = re.compile(r"run_mcu: OK: .* in (\d+) ms")


def fail(message):
    print(f"memory_report: {message}", file=sys.stderr)
    sys.exit(1)


def size_of(path, size_tool):
    """text, data, bss of an image (Berkeley format)."""
    result = subprocess.run([size_tool, path], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        fail(f"{size_tool} {path}: {result.stderr.strip()}")
    fields = result.stdout.splitlines()[1].split()
    return int(fields[0]), int(fields[1]), int(fields[2])


def symbol_bytes(path, nm_tool, names):
    """Total size of the symbols of an image whose names contain one of `names`."""
    result = subprocess.run([nm_tool, "--print-size", "--radix=d", path], capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        fail(f"{nm_tool} {path}: {result.stderr.strip()}")
    total = 0
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) == 4 and any(name in fields[3] for name in names):
            total += int(fields[1])
    return total


def linked_bytes(map_path, objects):
    """Flash (.text, .rodata, .data's initial values) and RAM (.data, .bss) an image's link map
    gives the input sections of the object files matching `objects`."""
    totals = {"flash": 0, "ram": 0}
    output_section = None

    def count(size_field, source):
        if not objects.search(source):
            return
        size = int(size_field, 16)
        if output_section in (".text", ".data"):
            totals["flash"] += size
        if output_section in (".data", ".bss"):
            totals["ram"] += size

    in_map = False
    pending = False  # an input section named alone on its line: address and size follow
    with open(map_path, encoding="utf-8") as lines:
        for line in lines:
            if not in_map:
                in_map = line.startswith("Linker script and memory map")
                continue
            fields = line.split()
            if line.startswith("."):
                output_section, pending = fields[0], False
            elif line.startswith((" .", " COMMON")):
                placed = len(fields) >= 4 and fields[1].startswith("0x") and \
                    fields[2].startswith("0x")
                if placed:
                    count(fields[2], " ".join(fields[3:]))
                pending = len(fields) == 1
            elif pending:
                if len(fields) >= 3 and fields[0].startswith("0x") and fields[1].startswith("0x"):
                    count(fields[1], " ".join(fields[2:]))
                pending = False
    return totals["flash"], totals["ram"]


def run_image(path, before=(), after=()):
    result = subprocess.run([RUN_MCU, "--timeout", "90", *before, path, *after],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        fail(f"{os.path.basename(path)} failed on qemu:\n{result.stdout}{result.stderr}")
    return result.stdout


def kib(count):
    return f"{count / 1024:.1f} KiB"


def secagg_section(output, map_path):
    """The device side of secure aggregation: flash and RAM, and instructions per phase."""
    device = SECAGG_DEVICE_LINE.search(output or "")
    phases = SECAGG_PHASE_LINE.findall(output or "")
    memory = MEMORY_LINE.search(output or "")
    if device is None or not phases or memory is None:
        fail(f"{SECAGG_IMAGE} printed no secure-aggregation figures")
    neighbours, words, arena, pool_peak, pool, round_count = map(int, device.groups())
    flash, ram = linked_bytes(map_path, SECAGG_DEVICE_OBJECTS)
    if flash == 0:
        fail(f"{map_path}: no secure-aggregation objects found in the link map")
    stack = int(memory.group(3))
    lines = ["## Secure aggregation on the device", "",
             f"One device of a round in `{SECAGG_IMAGE}`: {neighbours} neighbours (everyone "
             f"masks with everyone among five devices, threshold 3), {words} masked words "
             f"(random_block 1/64 of the 203,530-parameter MLP). Instructions are counted by "
             f"qemu (`-icount`), the same on every host; a Cortex-M4 spends at least one cycle "
             f"on each, more on loads, branches and flash wait states. Key agreement is mbed "
             f"TLS's X25519 on its generic bignums (with its Thumb-2 multiply-accumulate).", "",
             "| | figure |", "|---|---:|",
             f"| flash: the secagg device objects and the mbed TLS they link (from the link "
             f"map) | {flash} B ({kib(flash)}) |",
             f"| static RAM of those objects (mbed TLS's {pool} B pool included) | {ram} B |",
             f"| the device's arena (`Client::ArenaBytes`, {neighbours} neighbours) | "
             f"{arena} B |",
             f"| mbed TLS pool peak | {pool_peak} of {pool} B |",
             f"| stack peak of the image (its server included: a bound for the device) | "
             f"{stack} B |"]
    for phase, count in phases:
        lines.append(f"| {phase} | {int(count):,} instructions |")
    lines += [f"| **one round** | **{round_count:,} instructions** "
              f"({round_count / 25e6:.1f} s at the AN386's 25 MHz if one per cycle) |", ""]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the cortex-m4 build tree")
    parser.add_argument("--out", help="markdown file to write (default: stdout)")
    parser.add_argument("--size", default="arm-none-eabi-size", help="the size tool")
    parser.add_argument("--nm", help="the nm tool (default: the size tool's nm)")
    args = parser.parse_args()
    if args.nm is None:
        head, tail = os.path.split(args.size)
        args.nm = os.path.join(head, tail[:-len("size")] + "nm") if tail.endswith("size") \
            else "arm-none-eabi-nm"

    lines = ["# edgesgd Cortex-M4F memory report", "",
             "Images of the cortex-m4 preset (MinSizeRel: -Os), on qemu mps2-an386. Flash = "
             ".text + .data (the initial values live in flash); static RAM = .data + .bss; "
             "stack peak measured on the target (startup paints the stack). The images hold "
             "no heap (check_symbols.sh proves no allocator is linked).", "",
             "## Images", "",
             "| image | what | flash | static RAM | stack peak | RAM measured | qemu run |",
             "|---|---|---:|---:|---:|---:|---:|"]
    measured = {}
    secagg_output = secagg_map = None
    uart_flash = None
    plan_text = None
    for name, folder, what in IMAGES:
        path = os.path.join(args.build, folder, name + ".elf")
        if not os.path.isfile(path):
            fail(f"missing image {path} (build the cortex-m4 preset first)")
        text, data, bss = size_of(path, args.size)
        stack = ram = elapsed = "—"
        if name in MEASURED or name in ("edgesgd_mcu_memory_plan", SECAGG_IMAGE):
            if name == SECAGG_IMAGE:
                output = run_image(path, before=("--icount",), after=("--instructions",))
                secagg_output = output
                secagg_map = os.path.join(args.build, folder, name + ".map")
            else:
                output = run_image(path)
            elapsed_match = ELAPSED_LINE.search(output)
            elapsed = f"{elapsed_match.group(1)} ms" if elapsed_match else "—"
            if name == "edgesgd_mcu_memory_plan":
                plan_text = [line for line in output.splitlines()
                             if not line.startswith(("edgesgd ", "EDGESGD-MCU", "run_mcu:"))]
            else:
                memory = MEMORY_LINE.search(output)
                if memory is None:
                    fail(f"{name} printed no memory line")
                flash_run, static_run, stack_run, ram_run = map(int, memory.groups())
                # The image's figures come from linker symbols and include the padding between
                # sections; size adds section sizes. More than alignment apart means one is wrong.
                if (abs(flash_run - (text + data)) > ALIGNMENT_SLACK or
                        abs(static_run - (data + bss)) > ALIGNMENT_SLACK):
                    fail(f"{name}: measured flash/static RAM {flash_run}/{static_run} B differ "
                         f"from arm-none-eabi-size's {text + data}/{data + bss} B")
                measured[name] = (flash_run, ram_run)
                stack, ram = f"{stack_run} B", f"{ram_run} B ({kib(ram_run)})"
        if name == "edgesgd_mcu_worker_uart":
            shard = symbol_bytes(path, args.nm, UART_SHARD_SYMBOLS)
            if shard == 0:
                fail(f"{name}: no shard symbols {UART_SHARD_SYMBOLS} found")
            uart_flash = (text + data - shard, shard)
        lines.append(f"| `{name}` | {what} | {text + data} B ({kib(text + data)}) | "
                     f"{data + bss} B | {stack} | {ram} | {elapsed} |")

    flash_min, _ = measured["edgesgd_mcu_worker_min"]
    _, ram_10k = measured["edgesgd_mcu_train_10k"]
    _, ram_cnn = measured["edgesgd_mcu_train_cnn"]
    lines += ["", "## Targets", "",
              "| target | figure | budget | met |", "|---|---:|---:|---|",
              f"| core + wire + worker session + one registered codec (top_k), -Os, Status "
              f"reasons stripped: flash of "
              f"`edgesgd_mcu_worker_min` | {flash_min} B ({kib(flash_min)}) | "
              f"{FLASH_TARGET} B | {'yes' if flash_min <= FLASH_TARGET else 'no'} |",
              f"| 10,153-parameter MLP training with top_k + EF: RAM of `edgesgd_mcu_train_10k` "
              f"(static + stack peak) | {ram_10k} B ({kib(ram_10k)}) | {RAM_TARGET} B | "
              f"{'yes' if ram_10k <= RAM_TARGET else 'no'} |",
              f"| 1,898-parameter CNN training with top_k + EF: RAM of `edgesgd_mcu_train_cnn` "
              f"(static + stack peak) | {ram_cnn} B ({kib(ram_cnn)}) | {CNN_RAM_TARGET} B | "
              f"{'yes' if ram_cnn <= CNN_RAM_TARGET else 'no'} |",
              f"| federated worker over a UART with four codecs and authentication: flash of "
              f"`edgesgd_mcu_worker_uart` without its {uart_flash[1]} B data shard | "
              f"{uart_flash[0]} B ({kib(uart_flash[0])}) | {UART_FLASH_TARGET} B | "
              f"{'yes' if uart_flash[0] <= UART_FLASH_TARGET else 'no'} |", ""]
    if ram_10k <= RAM_TARGET:
        lines += ["The RAM target holds with three d-float vectors, the floor of error feedback "
                  "in fp32: the worker's gradient point and residual (momentum 0 keeps no "
                  "momentum buffer) and one buffer that holds the model between rounds and the "
                  "gradient within one, and that lends top_k's scratch to Compress while it is "
                  "idle (`ErrorFeedbackWorker::CodecScratch::kLent`). The Update frame, a batch "
                  "of two images, the stack and the image's globals share the rest.", ""]
    else:
        lines += ["The RAM target is not met. Three d-float vectors (120 KB at d = 10,000) are "
                  "the floor for EF in fp32; everything else (frame, batch, stack, globals) must "
                  "fit the remaining ~11 KB. The plan below gives, in its last column, the "
                  "largest d a lean device reaches within 128 KiB.", ""]
    lines += secagg_section(secagg_output, secagg_map)
    if plan_text is None:
        fail("the memory plan image printed nothing")
    lines += ["## Memory plan (computed on the target)", ""] + plan_text

    report = "\n".join(lines).rstrip() + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(report)
    else:
        sys.stdout.write(report)


if __name__ == "__main__":
    main()
