#!/usr/bin/env bash
# Checks what the eas binary links and what TLS stack it carries: the gnu build may need only
# libc, libm and libgcc_s (plus the vdso and the loader), and the dependency tree may hold no
# OpenSSL, native-tls or aws-lc-rs (TLS is rustls with ring). Usage: scripts/linkage.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [ -z "$bin" ]; then
  cargo build --locked --quiet --bin eas
  # shellcheck source=scripts/lib-target.sh
  source scripts/lib-target.sh
  bin=$(target_dir)/debug/eas
fi
status=0
libs=$(ldd "$bin" | awk '{ print $1 }')
for lib in $libs; do
  case "$lib" in
    linux-vdso.so.*|linux-gate.so.*|/lib*/ld-linux*.so.*|libc.so.*|libm.so.*|libgcc_s.so.*) ;;
    *) echo "linkage: $bin links $lib (only libc, libm, libgcc_s are allowed)"; status=1 ;;
  esac
done
forbidden=$(cargo tree --locked --target all --prefix none -e normal,build \
  | awk '{ print $1 }' | grep -E '^(openssl|openssl-sys|native-tls|aws-lc-rs|aws-lc-sys)$' | sort -u || true)
if [ -n "$forbidden" ]; then
  echo "linkage: the dependency tree holds $(echo "$forbidden" | tr '\n' ' ')(TLS must be rustls with ring)"
  status=1
fi
if ! cargo tree --locked --target all --prefix none -e normal | awk '{ print $1 }' | grep -x ring >/dev/null; then
  echo "linkage: ring is not in the dependency tree; the TLS provider changed"
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "linkage: $bin links only $(echo "$libs" | tr '\n' ' ')and the tree has no OpenSSL or aws-lc-rs"
fi
exit "$status"
