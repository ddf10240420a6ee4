# tests/fakes/e2b/interpreter.py - one code-interpreter context of the fake
# E2B sandbox: a long-lived Python process, started in the sandbox as
#   python3 -c BOOT CWD TREE
# (BOOT runs the source the fake writes, JSON, as the first line of stdin)
# that stands in for the Jupyter kernel behind E2B's code-interpreter server.
#
# It reads one request per line on stdin, {"code": ..., "env_vars": {...}},
# runs the code in its one namespace (so state persists between requests,
# as in a kernel) and writes, one JSON object per line on stdout, exactly the
# lines E2B's server streams back for POST /execute:
#   {"type": "number_of_executions", "execution_count": N}
#   {"type": "stdout"|"stderr", "text": ..., "timestamp": ...}
#   {"type": "result", "text": ..., "extra": {}, "is_main_result": true}
#   {"type": "error", "name": ..., "value": ..., "traceback": ...}
#   {"type": "end_of_execution"}
# Output is sent as it is produced: print() a line at a time, and what a
# child process writes to fd 1 or 2 as well (ipykernel captures it too).
# SIGINT interrupts the running code (KeyboardInterrupt), as a kernel
# interrupt does. Python standard library only.
import ast
import datetime
import json
import os
import select
import sys
import threading
import traceback

lock = threading.Lock()  # one writer on the protocol channel at a time

# The protocol channel is a private copy of fd 1; fd 0 becomes /dev/null
# (a kernel has no stdin: allow_stdin is false) and fds 1 and 2 become pipes
# whose contents are forwarded as stdout/stderr of the running execution.
proto = os.fdopen(os.dup(1), "w", buffering=1)
requests = os.fdopen(os.dup(0), "r")
os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
fd_pipes = {}
for fd, name in ((1, "stdout"), (2, "stderr")):
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.dup2(w, fd)
    os.close(w)
    fd_pipes[r] = name


def emit(msg):
    with lock:
        proto.write(json.dumps(msg) + "\n")


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def emit_text(name, text):
    if text:
        emit({"type": name, "text": text, "timestamp": now()})


def drain_fd_pipes():
    """Forward what child processes wrote to fds 1 and 2 so far."""
    for r, name in fd_pipes.items():
        chunks = []
        while True:
            try:
                data = os.read(r, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
        emit_text(name, b"".join(chunks).decode(errors="replace"))


def forward_fd_pipes():
    while True:
        ready, _, _ = select.select(list(fd_pipes), [], [])
        if ready:
            drain_fd_pipes()


class Stream:
    """sys.stdout/sys.stderr: sent a line at a time (and the rest at the
    end of the execution), as ipykernel's buffered streams deliver it."""

    def __init__(self, name):
        self.name, self.buf = name, ""

    def write(self, text):
        self.buf += text
        cut = self.buf.rfind("\n") + 1
        if cut:
            emit_text(self.name, self.buf[:cut])
            self.buf = self.buf[cut:]
        return len(text)

    def flush(self):
        emit_text(self.name, self.buf)
        self.buf = ""

    def isatty(self):
        return False


def error_of(exc):
    """The error line: the traceback from the cell's own frames on."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    tb = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
    return {"type": "error", "name": type(exc).__name__, "value": str(exc), "traceback": tb}


def result_of(value):
    """The execute_result of a cell's last expression, as E2B shapes it: the
    text/plain repr, with the quotes of a string's repr taken off."""
    text = repr(value)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return {"type": "result", "text": text, "extra": {}, "is_main_result": True}


def run(code, namespace):
    """Run a cell: all statements, then the value of a final expression."""
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        value = eval(compile(last, "<cell>", "eval"), namespace)
        if value is not None:
            namespace["_"] = value
            return result_of(value)
    return None


def main():
    os.chdir(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HOME", "/"))
    sys.stdout, sys.stderr = Stream("stdout"), Stream("stderr")
    threading.Thread(target=forward_fd_pipes, daemon=True).start()
    namespace = {"__name__": "__main__"}
    count = 0
    while True:
        try:
            line = requests.readline()
        except KeyboardInterrupt:  # an interrupt that came after the code ended
            continue
        if not line:
            return
        req = json.loads(line)
        count += 1
        emit({"type": "number_of_executions", "execution_count": count})
        env_vars = req.get("env_vars") or {}
        saved = {k: os.environ.get(k) for k in env_vars}
        os.environ.update(env_vars)
        outcome = None
        try:
            outcome = run(req["code"], namespace)
        except BaseException as exc:  # KeyboardInterrupt too: it is the interrupt
            outcome = error_of(exc)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            drain_fd_pipes()
            for k, v in saved.items():  # env_vars hold for this execution only
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        if outcome:
            emit(outcome)
        emit({"type": "end_of_execution"})


main()
