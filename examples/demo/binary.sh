# Sourced by the demo scripts, from the repository's root: installs the Debian packages the host
# build needs, then sets `edgesgd` to EDGESGD_DEMO_BINARY, or builds build/release's binary with
# EDGESGD_JOBS jobs (default 2) and uses that.
cmake/install-debian-deps.sh host
edgesgd="${EDGESGD_DEMO_BINARY:-}"
if [[ -z "$edgesgd" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "${EDGESGD_JOBS:-2}" --target edgesgd
  edgesgd=build/release/examples/edgesgd
fi
