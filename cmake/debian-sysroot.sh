#!/usr/bin/env bash
# Builds a project-local sysroot of Debian packages for another architecture, without touching
# the host's package database: apt runs with a private state, cache and source list (under
# DESTINATION/.apt, see cmake/debian-private-apt.sh) and with APT::Architecture set to the
# target, so nothing couples the target packages' versions to the host's, and the host's dpkg
# never learns of the target architecture.
#   cmake/debian-sysroot.sh ARCH DESTINATION PACKAGE...
# e.g. cmake/debian-sysroot.sh arm64 build/sysroots/aarch64-linux-gnu libmbedtls-dev zlib1g-dev
#
# The packages are resolved with the libraries they depend on, stopping at what the cross
# toolchain already provides (the C and C++ runtimes), downloaded with `apt-get download` and
# unpacked with `dpkg -x`. An index that fails to load is a warning; the newest version among the
# indexes that loaded is taken. A second call for the same packages finds DESTINATION's stamp
# and returns at once, with no network.
set -euo pipefail

if (($# < 3)); then
  echo "usage: $0 ARCH DESTINATION PACKAGE..." >&2
  exit 2
fi
architecture=$1
destination=$(realpath -m "$2")
shift 2
wanted=("$@")
label="debian-sysroot ($architecture)"
say() { echo "$label: $*" >&2; }

stamp="$destination/.edgesgd-sysroot"
request="$architecture ${wanted[*]}"
if [[ -f $stamp ]] && [[ $(head -n 1 "$stamp") == "$request" ]]; then
  exit 0
fi

# Packages the cross toolchains (g++-<triple>, with libc6-dev-<arch>-cross and libstdc++) already
# hold for the target: unpacking Debian's copies would put a second C library's headers in front
# of the compiler's own.
toolchain_provides=" libc6 libc6-dev libc-dev libgcc-s1 libstdc++6 libstdc++-12-dev gcc-12-base
  linux-libc-dev libcrypt1 libcrypt-dev "

. "$(dirname "$0")/debian-private-apt.sh"
apt_root="$destination/.apt"
private_apt_setup "$apt_root" "$architecture" deb
private_apt_update "$label"

# The candidate version of a package, and the first alternative of each of its Depends and
# Pre-Depends.
candidate() {
  apt-cache "${private_apt_options[@]}" policy "$1" 2>/dev/null |
    sed -nE 's/^[[:space:]]*Candidate:[[:space:]]*//p' | grep -v '(none)' || true
}
dependencies() {
  apt-cache "${private_apt_options[@]}" show --no-all-versions "$1" 2>/dev/null |
    sed -nE 's/^(Pre-)?Depends:[[:space:]]*//p' | tr ',' '\n' |
    sed -E 's/\|.*//; s/\(.*\)//; s/:any//; s/[[:space:]]//g' | grep -v '^$' || true
}

declare -A version_of=()
queue=("${wanted[@]}")
while ((${#queue[@]} > 0)); do
  package=${queue[0]}
  queue=("${queue[@]:1}")
  [[ -n ${version_of[$package]+set} || $toolchain_provides == *" $package "* ]] && continue
  version=$(candidate "$package")
  if [[ -z $version ]]; then
    say "error: no version of $package for $architecture in the indexes that loaded"
    exit 1
  fi
  version_of[$package]=$version
  for dependency in $(dependencies "$package"); do queue+=("$dependency"); done
done

packages=()
for package in "${!version_of[@]}"; do packages+=("$package=${version_of[$package]}"); done
say "downloading ${packages[*]}"
debs="$apt_root/debs"
rm -rf "$debs"
mkdir -p "$debs"
if ! (cd "$debs" && apt-get "${private_apt_options[@]}" download -qq "${packages[@]}") \
    >"$apt_root/download.log" 2>&1; then
  say "error: the download failed:"
  sed 's/^/  /' "$apt_root/download.log" >&2
  exit 1
fi

# Unpack into a fresh tree beside the old one, then swap, so that an interrupted run leaves no
# half-made sysroot behind a valid stamp.
staging="$destination.partial"
rm -rf "$staging"
mkdir -p "$staging"
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$staging"; done
rm -rf "$debs"
# Absolute links (usr/lib/<triple>/libx.so -> /lib/...) would point into the host: make them
# relative, inside the sysroot.
while IFS= read -r link; do
  target=$(readlink "$link")
  if [[ $target == /* ]]; then
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$staging$target")" "$link"
  fi
done < <(find "$staging" -type l)
# The private indexes served their purpose: the stamp, not them, makes a second run offline.
rm -rf "$destination"
mv "$staging" "$destination"
{
  echo "$request"
  printf '%s\n' "${packages[@]}" | sort
} >"$stamp"
say "ready in $destination ($(du -sh "$destination" | cut -f1))"
