#!/usr/bin/env bash
# Interrupt latency: how long `eas` takes to exit after SIGINT or SIGTERM while a phase waits on
# an API server that accepts and never answers. Each run starts the command, waits until the
# server has its connection, sends the signal, and times signal -> exit. Reports the median per
# command against the 1 s goal (issue 9), and fails if any run exits other than 130. `down --yes`
# is stopped in its first cluster read.
#
#   scripts/bench-interrupt.sh [RUNS]     default: 9 runs per command and signal
#   EAS_BIN=path/to/eas                   default: release/eas in cargo's target directory (built here)
set -euo pipefail

runs=${1:-9}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -z "${EAS_BIN:-}" ]; then
  cargo build -q --release --bin eas
  # shellcheck source=scripts/lib-target.sh
  source scripts/lib-target.sh
  EAS_BIN=$(target_dir)/release/eas
fi
export EAS_BIN

python3 - "$runs" <<'PY'
import os, socket, statistics, subprocess, sys, tempfile, threading, time, signal

runs = int(sys.argv[1])
eas = os.environ["EAS_BIN"]

def silent_server():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    accepted = threading.Semaphore(0)
    held = []
    def loop():
        while True:
            c, _ = s.accept()
            held.append(c)
            accepted.release()
    threading.Thread(target=loop, daemon=True).start()
    return s.getsockname()[1], accepted

port, accepted = silent_server()
work = tempfile.mkdtemp(prefix="eas-bench-interrupt-")
kc = os.path.join(work, "kubeconfig")
with open(kc, "w") as f:
    f.write(f"""apiVersion: v1
kind: Config
current-context: silent
clusters:
- name: silent
  cluster:
    server: http://127.0.0.1:{port}
contexts:
- name: silent
  context:
    cluster: silent
    user: u
users:
- name: u
  user:
    token: t
""")
env = dict(os.environ, HOME=os.path.join(work, "home"), CI="1", NO_COLOR="1",
           DOCKER_HOST="unix:///nonexistent/eas-bench/docker.sock")
env.pop("KUBECONFIG", None)
commands = [["up", "--dry-run"], ["facts"], ["verify"], ["doctor"], ["down", "--yes"]]
bad = 0
print(f"{'command':<14} {'signal':<7} {'median':>8} {'max':>8}  goal 1 s")
for cmd in commands:
    for sig in (signal.SIGINT, signal.SIGTERM):
        times = []
        for _ in range(runs):
            # A command may open several connections; count only those of this run.
            while accepted.acquire(blocking=False):
                pass
            p = subprocess.Popen([eas, "--kubeconfig", kc, "--state-dir", os.path.join(work, "state"), *cmd],
                                 env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            if not accepted.acquire(timeout=30):
                p.kill(); sys.exit(f"bench-interrupt: {cmd} never reached the API server")
            t0 = time.monotonic()
            p.send_signal(sig)
            try:
                code = p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill(); p.wait(); code = None
            times.append(time.monotonic() - t0)
            if code != 130:
                bad += 1
                print(f"bench-interrupt: {' '.join(cmd)} exited {code} after {sig.name}", file=sys.stderr)
        med = statistics.median(times)
        verdict = "ok" if med <= 1.0 else "OVER"
        print(f"{' '.join(cmd):<14} {sig.name:<7} {med*1000:>6.0f}ms {max(times)*1000:>6.0f}ms  {verdict}")
sys.exit(1 if bad else 0)
PY
