#!/usr/bin/env bash
# Installs what edgesgd needs from Debian 12, by group, skipping what is already there, so that a
# second run is quick and needs no network. Run as root.
#   cmake/install-debian-deps.sh [--unavailable FILE] GROUP...
# Groups: `host` (build and run on this machine: the demo), and one per test stage: `release`,
# `asan`, `aarch64`, `armhf`, `cortex-m4` (`cross` is the last three).
#
# Each group has three kinds of needs:
#   - host packages, installed with apt-get (only the missing ones);
#   - for the ARM Linux stages, target libraries (mbed TLS, zlib) unpacked into a sysroot of the
#     project's own, build/sysroots/<triple>, by cmake/debian-sysroot.sh: nothing is installed
#     into the host for a foreign architecture;
#   - for the Cortex-M4 stage, Debian's mbed TLS source package, unpacked into build/debian-src
#     (Debian ships mbed TLS built for Linux only; the bare-metal build compiles the parts it uses
#     from source with its own configuration).
# What cannot be had is named in one line with the groups that need it. Those groups are written
# to FILE (`GROUP<TAB>reason`, one a line) when --unavailable is given, and the script exits 3;
# the other groups are still set up. Any other failure exits 1 (2 for a usage error).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$here/debian-private-apt.sh"

# Host packages. The release and asan stages test on this machine (asan with Clang and its
# sanitizer runtimes); the cross stages also build host tools (flatc) and use the headers of the
# architecture-independent libraries (Eigen, Asio, CLI11, FlatBuffers) and GoogleTest's source.
common="cmake ninja-build g++ make binutils libeigen3-dev googletest libcli11-dev zlib1g-dev
        libflatbuffers-dev flatbuffers-compiler libasio-dev libmbedtls-dev libssl-dev openssl
        dataset-fashion-mnist python3-matplotlib iproute2"
declare -A host_packages=(
  [host]="$common"
  [release]="$common"
  [asan]="$common clang libclang-rt-14-dev"
  [aarch64]="$common g++-aarch64-linux-gnu qemu-user"
  [armhf]="$common g++-arm-linux-gnueabihf qemu-user"
  # The mixed-fleet test runs an aarch64 worker beside the microcontrollers: qemu-user too.
  [cortex-m4]="$common gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib
               qemu-system-arm qemu-user dpkg-dev"
)
# Target libraries: "Debian architecture, triple, packages".
declare -A sysroots=(
  [aarch64]="arm64 aarch64-linux-gnu libmbedtls-dev zlib1g-dev"
  [armhf]="armhf arm-linux-gnueabihf libmbedtls-dev zlib1g-dev"
)
declare -A source_packages=([cortex-m4]="mbedtls")

unavailable_file=
if [[ ${1:-} == --unavailable ]]; then
  unavailable_file=${2:?--unavailable needs a file}
  shift 2
  : >"$unavailable_file"
fi
groups=()
for requested in "${@:-host}"; do
  expanded=("$requested")
  [[ $requested == cross ]] && expanded=(aarch64 armhf cortex-m4)
  for group in "${expanded[@]}"; do
    if [[ -z ${host_packages[$group]+set} ]]; then
      echo "install-debian-deps: unknown group '$group' (known: host release asan aarch64" \
           "armhf cortex-m4 cross)" >&2
      exit 2
    fi
    [[ " ${groups[*]} " == *" $group "* ]] || groups+=("$group")
  done
done

declare -A unavailable=()
# give_up_on REASON GROUP...: says what cannot be had and by whom it is needed, and marks those
# groups unavailable.
give_up_on() {
  local reason=$1 group
  shift
  for group in "$@"; do
    [[ -n ${unavailable[$group]+set} ]] || unavailable[$group]=$reason
  done
  echo "install-debian-deps: $reason; needed by: $*" >&2
}
# The requested groups whose host packages include $1.
groups_needing() {
  local group needers=()
  for group in "${groups[@]}"; do
    # shellcheck disable=SC2086  # the package list is words
    [[ " $(echo ${host_packages[$group]}) " == *" $1 "* ]] && needers+=("$group")
  done
  echo "${needers[@]}"
}

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# --- host packages ---
missing=()
for group in "${groups[@]}"; do
  for package in ${host_packages[$group]}; do
    if ! installed "$package" && [[ " ${missing[*]} " != *" $package "* ]]; then
      missing+=("$package")
    fi
  done
done
if ((${#missing[@]} > 0)); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-debian-deps: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "install-debian-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  updated=0
  for attempt in 1 2 3; do
    if apt-get update -qq; then updated=1; break; fi
    ((attempt < 3)) && sleep 5
  done
  ((updated)) ||
    echo "install-debian-deps: warning: apt-get update failed 3 times; installing from the" \
         "indexes it has" >&2
  # --no-install-recommends keeps qemu-system-arm to a few packages instead of a desktop stack.
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    # One package that cannot be had must not cost the others: try each alone, then name the
    # ones that failed with the groups that need them.
    for package in "${missing[@]}"; do
      installed "$package" && continue
      # shellcheck disable=SC2046  # the groups are words
      apt-get install -y -qq --no-install-recommends "$package" >/dev/null 2>&1 ||
        give_up_on "cannot install the Debian package $package" $(groups_needing "$package")
    done
  fi
fi

# --- target sysroots ---
for group in "${groups[@]}"; do
  [[ -n ${sysroots[$group]+set} && -z ${unavailable[$group]+set} ]] || continue
  read -r architecture triple libraries <<<"${sysroots[$group]}"
  # shellcheck disable=SC2086  # the library list is words
  if ! "$here/debian-sysroot.sh" "$architecture" "$top/build/sysroots/$triple" $libraries; then
    give_up_on "cannot make the $triple sysroot" "$group"
  fi
done

# --- source packages, each unpacked once into build/debian-src/<package>-<version> ---
for group in "${groups[@]}"; do
  [[ -n ${source_packages[$group]+set} && -z ${unavailable[$group]+set} ]] || continue
  destination="$top/build/debian-src"
  for name in ${source_packages[$group]}; do
    compgen -G "$destination/$name-[0-9]*/" >/dev/null && continue
    echo "install-debian-deps: unpacking the source of $name into $destination" >&2
    mkdir -p "$destination"
    private_apt_setup "$destination/.apt" "$(dpkg --print-architecture)" deb-src
    private_apt_update "install-debian-deps"
    if ! (cd "$destination" && apt-get "${private_apt_options[@]}" source -qq "$name" \
            >/dev/null); then
      give_up_on "cannot fetch the Debian source package $name" "$group"
    fi
  done
done

if ((${#unavailable[@]} > 0)); then
  if [[ -n $unavailable_file ]]; then
    for group in "${!unavailable[@]}"; do
      printf '%s\t%s\n' "$group" "${unavailable[$group]}" >>"$unavailable_file"
    done
  fi
  exit 3
fi
