#!/usr/bin/env bash
# Cost of the allowlist proxy (src/proxy/ and the relay in src/inner.rs):
# the same Python client, once straight to a host server on loopback and once
# from inside `sbx run --allow-domain 127.0.0.1:PORT` through the proxy.
#
#   throughput  stream 1 GiB to a sink (CONNECT tunnel vs direct TCP); the
#               sink answers with the byte count, which the client checks.
#               Median MB/s (10^6 bytes/s) over a few rounds.
#   latency     ~50 small HTTP GETs one after another, each on a new
#               connection (plain-HTTP proxying vs direct), all from inside
#               one sandbox run so sandbox start-up is not counted. Median
#               ms per round, then the median over the rounds.
#
# Usage: bench/proxy.sh [--quick]      (--quick: 16 MiB, 5 requests, 1 round)
# Environment: SBX (the binary; default: build release and copy it to
# $SBX_BENCH_DIR/sbx, outside /tmp and the checkout), SBX_BENCH_DIR (default
# /var/tmp/sbx-bench-proxy), SBX_BENCH_OUT (also write proxy.json there, for
# bench/report.py), PROXY_BENCH_MIB, PROXY_BENCH_REQUESTS, PROXY_BENCH_ROUNDS.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1
mib=${PROXY_BENCH_MIB:-1024}
requests=${PROXY_BENCH_REQUESTS:-50}
rounds=${PROXY_BENCH_ROUNDS:-3}
if [ $quick = 1 ]; then mib=16; requests=5; rounds=1; fi

dir=${SBX_BENCH_DIR:-/var/tmp/sbx-bench-proxy}
mkdir -p "$dir/project"
if [ -z "${SBX:-}" ]; then
  cargo build --release --quiet
  cp target/release/sbx "$dir/sbx"
  SBX=$dir/sbx
fi
# The system Python, not a pyenv shim (which needs more of HOME than the
# sandbox shows); the same one on both sides.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

# Host side: a sink (counts bytes until EOF, answers the count) and a tiny
# HTTP server (one request per connection), on ephemeral loopback ports.
cat > "$dir/server.py" <<'PY'
import os, socket, sys, threading

def sink(c):
    n, buf = 0, bytearray(1 << 20)
    while True:
        k = c.recv_into(buf)
        if not k:
            break
        n += k
    c.sendall(str(n).encode())
    c.close()

def http(c):
    d = b""
    while b"\r\n\r\n" not in d:
        x = c.recv(65536)
        if not x:
            break
        d += x
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    c.close()

def serve(listener, handler):
    while True:
        c, _ = listener.accept()
        threading.Thread(target=handler, args=(c,), daemon=True).start()

ports = []
for handler in (sink, http):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    ports.append(str(listener.getsockname()[1]))
    threading.Thread(target=serve, args=(listener, handler), daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(" ".join(ports) + "\n")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
threading.Event().wait()
PY

# The client, in the project so the sandbox can read it.
#   client.py stream  direct|proxy HOST PORT BYTES     -> MB/s
#   client.py latency direct|proxy HOST PORT REQUESTS  -> median ms
# "proxy" uses the run's HTTPS_PROXY (http://sbx:TOKEN@127.0.0.1:3128).
cat > "$dir/project/client.py" <<'PY'
import base64, os, socket, statistics, sys, time, urllib.parse

mode, via, host, port, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
target = f"{host}:{port}"
if via == "proxy":
    u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    proxy = (u.hostname, u.port)
    auth = "Proxy-Authorization: Basic %s\r\n" % base64.b64encode(f"{u.username}:{u.password}".encode()).decode()

def tunnel():
    s = socket.create_connection(proxy)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        c = s.recv(1)
        if not c:
            break
        head += c
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit(f"CONNECT refused: {head!r}")
    return s

def read_all(s):
    out = bytearray()
    while True:
        c = s.recv(65536)
        if not c:
            return bytes(out)
        out += c

if mode == "stream":
    s = tunnel() if via == "proxy" else socket.create_connection((host, port))
    chunk = memoryview(os.urandom(1 << 20))
    start = time.perf_counter()
    sent = 0
    while sent < n:
        k = min(len(chunk), n - sent)
        s.sendall(chunk[:k])
        sent += k
    s.shutdown(socket.SHUT_WR)
    ack = read_all(s)
    elapsed = time.perf_counter() - start
    if ack != str(n).encode():
        sys.exit(f"the sink received {ack!r} bytes, not {n}")
    print(f"{n / elapsed / 1e6:.1f}")
else:
    times = []
    for i in range(n + 1):  # the first request warms up and is not counted
        start = time.perf_counter()
        if via == "proxy":
            s = socket.create_connection(proxy)
            req = f"GET http://{target}/{i} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n"
        else:
            s = socket.create_connection((host, port))
            req = f"GET /{i} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"
        s.sendall(req.encode())
        answer = read_all(s)
        s.close()
        if not (answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\nok")):
            sys.exit(f"unexpected answer: {answer!r}")
        if i:
            times.append(time.perf_counter() - start)
    print(f"{statistics.median(times) * 1000:.3f}")
PY

rm -f "$dir/ports"
"$py" "$dir/server.py" "$dir/ports" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -f "$dir/ports" ] && break; sleep 0.05; done
read -r sink_port http_port < "$dir/ports"

cd "$dir/project"
bytes=$((mib * 1024 * 1024))
sbx_run() { # PORT ARGS... (a hang ends the benchmark instead of blocking it)
  local port=$1; shift
  timeout 1800 "$SBX" run --allow-domain "127.0.0.1:$port" -- "$@"
}

echo "== allowlist proxy: ${mib} MiB streamed ($rounds rounds), $requests small GETs"
# Interleaved rounds: a burst of load on the machine hits both sides alike.
direct_mbps=(); proxy_mbps=(); direct_ms=(); proxy_ms=()
for _ in $(seq "$rounds"); do
  direct_mbps+=("$("$py" client.py stream direct 127.0.0.1 "$sink_port" "$bytes")")
  proxy_mbps+=("$(sbx_run "$sink_port" "$py" client.py stream proxy 127.0.0.1 "$sink_port" "$bytes")")
  direct_ms+=("$("$py" client.py latency direct 127.0.0.1 "$http_port" "$requests")")
  proxy_ms+=("$(sbx_run "$http_port" "$py" client.py latency proxy 127.0.0.1 "$http_port" "$requests")")
done

"$py" - "${SBX_BENCH_OUT:-}" "$mib" "$requests" \
  "${direct_mbps[*]}" "${proxy_mbps[*]}" "${direct_ms[*]}" "${proxy_ms[*]}" <<'PY'
import json, os, statistics, sys
out, mib, requests = sys.argv[1:4]
runs = [sys.argv[i] for i in range(4, 8)]
d, p, d_ms, p_ms = (statistics.median(float(x) for x in r.split()) for r in runs)
print(f"throughput  direct {d:9.1f} MB/s   proxy {p:9.1f} MB/s   ratio {p / d:.2f}"
      f"   (rounds: direct {runs[0]}; proxy {runs[1]})")
print(f"latency     direct {d_ms:9.3f} ms     proxy {p_ms:9.3f} ms     "
      f"{p_ms - d_ms:+.3f} ms per request (median of {requests} per round;"
      f" rounds: direct {runs[2]}; proxy {runs[3]})")
direct_ms, proxy_ms = d_ms, p_ms
if out:
    with open(os.path.join(out, "proxy.json"), "w") as f:
        json.dump({"direct_mbps": d, "proxy_mbps": p, "direct_ms": direct_ms,
                   "proxy_ms": proxy_ms, "mib": int(mib), "requests": int(requests)}, f)
PY
