"""What `keyhole proxy --compose` adds to a request (BENCHMARKS.md, "Proxy compose overhead").

The same llama.vim-shaped /infill requests (holes at random lines of the Java sample, the
cursor in the middle of the line) go one at a time through a proxy without --compose and one
with it, both in front of a server in this process that answers at once; two rounds each.

    keyhole proxy --listen 127.0.0.1:18191 --to http://127.0.0.1:18190 &
    keyhole proxy --listen 127.0.0.1:18192 --to http://127.0.0.1:18190 \\
        --compose --repo examples/sample-repo &   # wait for "is open ("
    python3 examples/proxy_compose_overhead.py examples/sample-repo 18190 18191,18192 500
"""

import glob
import http.client
import json
import os
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"content":"x","tokens_predicted":1}'
        # One write: headers and body apart would meet Nagle and delayed ACKs (40 ms).
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        self.wfile.write(head % len(body) + body)

    def log_message(self, *args):
        pass


def requests(sample, n):
    files = sorted(glob.glob(os.path.join(sample, "**/*.java"), recursive=True))
    random.seed(7)
    bodies = []
    while len(bodies) < n:
        text = open(random.choice(files)).read()
        lines = text.split("\n")
        i = random.randrange(len(lines))
        code = lines[i].strip()
        if len(code) < 8:
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())
        cut = sum(len(line) + 1 for line in lines[:i]) + indent + len(code) // 2
        request = {"input_prefix": text[:cut], "prompt": "", "input_suffix": text[cut:],
                   "n_predict": 64, "input_extra": []}
        bodies.append(json.dumps(request).encode())
    return bodies


def measure(port, bodies):
    connection = http.client.HTTPConnection("127.0.0.1", port)
    times = []
    for body in bodies:
        start = time.perf_counter()
        connection.request("POST", "/infill", body, {"Content-Type": "application/json"})
        connection.getresponse().read()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return [times[int((len(times) - 1) * q)] for q in (0.5, 0.9, 0.99)]


def main():
    sample, upstream, ports, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    server = ThreadingHTTPServer(("127.0.0.1", upstream), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bodies = requests(sample, n)
    for round_ in range(2):
        for name, port in zip(["plain", "compose"], ports.split(",")):
            p50, p90, p99 = measure(int(port), bodies)
            print(f"round {round_} {name:8} p50 {p50:.2f} ms  p90 {p90:.2f} ms  p99 {p99:.2f} ms")


main()
