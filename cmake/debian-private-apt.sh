# Sourced by cmake/debian-sysroot.sh and cmake/install-debian-deps.sh: apt with a state, cache
# and source list of the project's own, so that fetching target libraries or source packages
# changes nothing in the host's package database or its apt sources. The host's apt.conf.d (a
# proxy, say) still applies.

# The host's Debian mirror whose URI ends in /$1 (debian or debian-security), from its apt sources
# in either format; empty when there is none.
private_apt_host_uri() {
  local suffix=$1
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
      2>/dev/null |
    sed -nE -e 's/^[[:space:]]*URIs:[[:space:]]*//p' \
            -e 's/^[[:space:]]*deb(-src)?[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\3/p' |
    tr ' ' '\n' | grep -E "/$suffix/?\$" | sed 's:/$::' | sort -u | head -n 1 || true
}

# private_apt_setup ROOT ARCHITECTURE TYPE: prepares ROOT for apt and sets the array
# `private_apt_options`. TYPE is `deb` (binary packages of ARCHITECTURE) or `deb-src`. The
# sources are the host's Debian mirrors (or EDGESGD_DEBIAN_MIRROR and
# EDGESGD_DEBIAN_SECURITY_MIRROR) for the host's suite, its updates and its security updates.
private_apt_setup() {
  local root=$1 architecture=$2 type=$3
  mkdir -p "$root/lists/partial" "$root/archives/partial" "$root/sources.list.d"
  : >"$root/status"
  : >"$root/sources.list"
  local mirror security_mirror suite keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  mirror=${EDGESGD_DEBIAN_MIRROR:-$(private_apt_host_uri debian)}
  security_mirror=${EDGESGD_DEBIAN_SECURITY_MIRROR:-$(private_apt_host_uri debian-security)}
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  {
    printf 'Types: %s\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: %s\n\n' \
      "$type" "${mirror:-http://deb.debian.org/debian}" "$suite" "$suite" "$keyring"
    printf 'Types: %s\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: %s\n' \
      "$type" "${security_mirror:-http://deb.debian.org/debian-security}" "$suite" "$keyring"
  } >"$root/sources.list.d/debian.sources"
  private_apt_options=(
    -o "Dir::State=$root" -o "Dir::State::status=$root/status"
    -o "Dir::State::Lists=$root/lists" -o "Dir::Cache=$root"
    -o "Dir::Cache::Archives=$root/archives" -o "Dir::Etc::SourceList=$root/sources.list"
    -o "Dir::Etc::SourceParts=$root/sources.list.d" -o "APT::Architecture=$architecture"
    -o "APT::Architectures::=$architecture" -o "Debug::NoLocking=1" -o "Acquire::Languages=none"
    -o "APT::Sandbox::User=root")
}

# private_apt_update LABEL: refreshes the indexes, three tries five seconds apart. A mirror caught
# mid-sync fails one index for a while and the others are enough when they hold the packages
# (Debian's main suite alone is), so a last failure is a warning naming the indexes, not a stop.
private_apt_update() {
  local label=$1 attempt log
  log=$(mktemp)
  for attempt in 1 2 3; do
    if apt-get "${private_apt_options[@]}" update -qq >"$log" 2>&1; then
      rm -f "$log"
      return 0
    fi
    ((attempt < 3)) && sleep 5
  done
  echo "$label: warning: some package indexes did not load; using those that did:" >&2
  grep -E '^(E|W):' "$log" | sed 's/^/  /' >&2 || true
  rm -f "$log"
  return 0
}
