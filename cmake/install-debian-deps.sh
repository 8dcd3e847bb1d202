#!/usr/bin/env bash
# Installs the Debian 12 packages edgesgd needs, by group, skipping those already installed so
# that repeated runs are quick and need no network. Run as root.
#   cmake/install-debian-deps.sh host          build + test on this machine
#   cmake/install-debian-deps.sh host cross    also ARM Linux and Cortex-M cross builds
# The cross group also unpacks Debian's mbed TLS source package into build/debian-src: Debian
# ships mbed TLS built for Linux only, and the Cortex-M build compiles the parts it uses (SHA-256
# and HMAC for authenticated serial links) from that source with its own configuration.
# A package named `name:arch` is a Debian multiarch package for another architecture (the ARM
# Linux cross builds link libraries from /usr/lib/<triple>); its architecture is added to dpkg
# first if it is not there yet.
set -euo pipefail

# The host group has both compilers: GCC builds the release preset, Clang (with its sanitizer
# runtimes, libclang-rt-14-dev) the asan preset.
declare -A groups=(
  [host]="cmake ninja-build g++ clang libclang-rt-14-dev make libeigen3-dev googletest
          libcli11-dev zlib1g-dev libflatbuffers-dev flatbuffers-compiler libasio-dev
          libmbedtls-dev libssl-dev openssl dataset-fashion-mnist python3-matplotlib binutils
          iproute2"
  [cross]="g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user gcc-arm-none-eabi
           libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm
           libmbedtls-dev:arm64 libmbedtls-dev:armhf zlib1g-dev:arm64 zlib1g-dev:armhf
           dpkg-dev"
)
# Source packages each group unpacks into build/debian-src (see fetch_sources below).
declare -A source_groups=([cross]="mbedtls")

wanted=()
for group in "${@:-host}"; do
  if [[ -z "${groups[$group]+set}" ]]; then
    echo "install-debian-deps: unknown group '$group' (known: ${!groups[*]})" >&2
    exit 2
  fi
  wanted+=(${groups[$group]})
done

# Unpacks each Debian source package in `$@` into build/debian-src/<package>-<version>, once.
# `apt-get source` needs a deb-src entry; one for the machine's Debian suite is added if no
# source index is configured yet.
fetch_sources() {
  local destination
  destination="$(cd "$(dirname "$0")/.." && pwd)/build/debian-src"
  local wanted_sources=()
  local name
  for name in "$@"; do
    if ! compgen -G "$destination/$name-[0-9]*/" >/dev/null; then wanted_sources+=("$name"); fi
  done
  ((${#wanted_sources[@]} == 0)) && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-debian-deps: need root to fetch the source of: ${wanted_sources[*]}" >&2
    exit 1
  fi
  local apt_sources=(/etc/apt/sources.list /etc/apt/sources.list.d/)
  if ! grep -rqs '^\(Types:.*deb-src\|deb-src \)' "${apt_sources[@]}"; then
    local suite
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    echo "install-debian-deps: adding a deb-src entry for Debian $suite" >&2
    printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' "Suites: $suite" \
      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
      >/etc/apt/sources.list.d/edgesgd-deb-src.sources
    apt-get update -qq || true
  fi
  mkdir -p "$destination"
  echo "install-debian-deps: unpacking the source of ${wanted_sources[*]} into $destination" >&2
  (cd "$destination" && apt-get source -qq "${wanted_sources[@]}" >/dev/null)
}

missing=()
for package in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

sources=()
for group in "${@:-host}"; do
  sources+=(${source_groups[$group]:-})
done

if ((${#missing[@]} == 0)); then
  fetch_sources "${sources[@]}"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-debian-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "install-debian-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
for package in "${missing[@]}"; do
  if [[ $package == *:* ]]; then
    architecture=${package##*:}
    if [[ $architecture != "$(dpkg --print-architecture)" ]] &&
       ! dpkg --print-foreign-architectures | grep -qx "$architecture"; then
      echo "install-debian-deps: adding architecture $architecture" >&2
      dpkg --add-architecture "$architecture"
    fi
  fi
done
# A mirror caught mid-sync can fail one index (seen for a foreign architecture's security
# updates) while the others refresh; the install below then still finds every package or names
# the one it cannot.
if ! apt-get update -qq; then
  echo "install-debian-deps: apt-get update reported errors; installing from the indexes it has" >&2
fi
# --no-install-recommends keeps qemu-system-arm to a few packages instead of a desktop stack.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fetch_sources "${sources[@]}"
