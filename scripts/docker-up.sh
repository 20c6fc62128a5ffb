#!/usr/bin/env bash
# Makes sure a Docker Engine answers: installs Debian's docker.io when dockerd is missing and
# starts dockerd in the background when nothing answers. Idempotent; used by .ci/run and tests.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi
log=${EAS_DOCKERD_LOG:-/tmp/eas-dockerd.log}
# In a session of its own: an engine started by one job (a test run, an editor's terminal) is
# not killed with that job's process group when the job ends.
setsid nohup dockerd >"$log" 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    exit 0
  fi
  sleep 1
done
echo "docker-up: dockerd did not answer within 60 s; see $log" >&2
tail -n 20 "$log" >&2 || true
exit 1
