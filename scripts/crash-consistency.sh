#!/usr/bin/env bash
# Crash consistency (issue 11): SIGKILL `eas up` at 30 points (three install-log markers and 27
# time offsets drawn with a fixed seed), then `eas up --break-lock`, `eas down` and a second
# `eas down` against the stateful recorded cluster, with a real Docker Engine. Prints
# "crash consistency: N of 30 points". Serialized with the other Docker tests on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
exec flock /tmp/eas-docker.lock cargo test --test down_safety -- --ignored --nocapture crash_consistency_at_30_points
