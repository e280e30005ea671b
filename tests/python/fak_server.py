"""Starts `fak serve` on a free 127.0.0.1 port for the client tests and waits until it is ready."""
import re
import subprocess
import time


def start_server(fak, model, *args):
    """Returns (process, port); `args` are more flags for fak serve."""
    proc = subprocess.Popen([fak, "serve", "-m", model, "--port", "0", "-t", "2", "--alias", "tiny", *args],
                            stdout=subprocess.PIPE, text=True)
    port = None
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "fak serve: ready" in line:
            break
    assert port, "the server did not start"
    return proc, port
