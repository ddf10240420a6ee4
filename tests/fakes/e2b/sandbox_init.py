# tests/fakes/e2b/sandbox_init.py - the fake E2B sandbox's own agent.
#
# fake_e2b.py starts one of these per sandbox, inside bubblewrap, as
#   python3 -c BOOT FD TREE
# (BOOT runs the source the fake writes, JSON, as the first line of stdin),
# where TREE marks the process as the sandbox's and FD is one end of a SOCK_SEQPACKET socket pair. It is what envd is in a
# real sandbox: the one process that lives in the sandbox's view of the world
# (its /home/user, its /tmp, its PID namespace, maybe no network) and does,
# on the fake's behalf, everything that must happen in that view: it starts
# commands (their pipes come from the fake over SCM_RIGHTS), signals them,
# and does the file operations. Doing the file operations here rather than
# in the fake keeps them inside the sandbox: a symlink a command made cannot
# lead a write of the fake's (which runs as root on the host) out of the
# sandbox, and the read-only root stays read-only.
#
# Each message is one JSON object (one datagram; a bigger one travels
# through a pipe whose read end is the datagram's first fd, see send());
# requests carry "id" and "op", replies carry the same "id" and either the result or
# {"error": {"kind": K, "message": M}} with K one of not_found, exists,
# not_dir, is_dir, invalid, internal. Events carry "event": "ready" once,
# "exit" with the pid and its wait status when a started command ends.
#
# Python standard library only. Runs as PID 2 of the sandbox's PID
# namespace (bubblewrap's own reaper is PID 1 and reaps the orphans).
import ctypes
import errno
import grp
import json
import os
import pwd
import selectors
import shutil
import signal
import socket
import stat
import sys
import time

MAX_DGRAM = 64 << 10  # bigger messages go through a pipe
sock = socket.socket(fileno=int(sys.argv[1]))
started = set()  # pids of the commands this agent started


class OpError(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def send(msg, fds=()):
    """One message, with fds. A datagram has a size limit (the socket
    buffer), so a big message (a long listing) goes as {"via_fd": true} with
    a pipe before the fds, and its JSON is written into the pipe."""
    data = json.dumps(msg).encode()
    if len(data) <= MAX_DGRAM:
        socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
        return
    r, w = os.pipe2(os.O_CLOEXEC)
    socket.send_fds(sock, [b'{"via_fd": true}'], [r] + list(fds))
    os.close(r)
    with open(w, "wb") as f:
        f.write(data)


def receive():
    """The next message and its fds (None at the end), see send()."""
    data, fds, _, _ = socket.recv_fds(sock, MAX_DGRAM, 9)
    if not data:
        return None, []
    msg = json.loads(data)
    if msg.get("via_fd"):
        with open(fds.pop(0), "rb") as f:
            msg = json.loads(f.read())
    return msg, fds


def os_error(e, op, path, prefix=""):
    """An OSError as an OpError, in the words of Go's os.PathError
    ("lstat /x: no such file or directory"), after prefix."""
    kind = {errno.ENOENT: "not_found", errno.EEXIST: "exists",
            errno.ENOTDIR: "not_dir", errno.EISDIR: "is_dir"}.get(e.errno, "internal")
    return OpError(kind, f"{prefix}{op} {path}: {(e.strerror or str(e)).lower()}")


# ---- file entries, as envd's EntryInfo (proto JSON) -------------------------

def go_mode_string(mode):
    """os.FileMode.String() of Go for a POSIX mode: 'drwxr-xr-x', 'Lrwxrwxrwx'."""
    s = ""
    if stat.S_ISDIR(mode):
        s += "d"
    if stat.S_ISLNK(mode):
        s += "L"
    if stat.S_ISBLK(mode) or stat.S_ISCHR(mode):
        s += "D"
    if stat.S_ISFIFO(mode):
        s += "p"
    if stat.S_ISSOCK(mode):
        s += "S"
    if mode & stat.S_ISUID:
        s += "u"
    if mode & stat.S_ISGID:
        s += "g"
    if stat.S_ISCHR(mode):
        s += "c"
    if mode & stat.S_ISVTX:
        s += "t"
    s = s or "-"
    for i, c in enumerate("rwxrwxrwx"):
        s += c if mode & (1 << (8 - i)) else "-"
    return s


def timestamp(ns):
    """A google.protobuf.Timestamp in proto JSON: RFC 3339, 0/3/6/9 fraction digits."""
    secs, nanos = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    if nanos == 0:
        return base + "Z"
    if nanos % 1_000_000 == 0:
        return f"{base}.{nanos // 1_000_000:03d}Z"
    if nanos % 1000 == 0:
        return f"{base}.{nanos // 1000:06d}Z"
    return f"{base}.{nanos:09d}Z"


def name_of(table, ident):
    try:
        return table(ident)[0]
    except KeyError:
        return str(ident)


def entry(path):
    """envd's EntryInfo for path (not following a final symlink for the
    entry itself, but typed by its target, as envd does)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise os_error(e, "lstat", path, "file not found: " if e.errno == errno.ENOENT
                       else "error getting file info: ")
    e = {"name": os.path.basename(path.rstrip("/")) or "/", "path": path}
    ftype, perm = st.st_mode, st.st_mode
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(path)
        e["symlinkTarget"] = target
        try:
            tst = os.stat(target)
            ftype, perm = tst.st_mode, tst.st_mode
        except OSError:
            ftype, perm = 0, 0
    if stat.S_ISREG(ftype):
        e["type"] = "FILE_TYPE_FILE"
    elif stat.S_ISDIR(ftype):
        e["type"] = "FILE_TYPE_DIRECTORY"
    # proto3 JSON leaves out zero values: a zero size or mode is absent.
    if st.st_size:
        e["size"] = str(st.st_size)  # int64: a string in proto JSON
    if stat.S_IMODE(perm) & 0o777:
        e["mode"] = stat.S_IMODE(perm) & 0o777
    e["permissions"] = go_mode_string(st.st_mode)
    e["owner"] = name_of(pwd.getpwuid, st.st_uid)
    e["group"] = name_of(grp.getgrgid, st.st_gid)
    e["modifiedTime"] = timestamp(st.st_mtime_ns)
    return e


# ---- operations -----------------------------------------------------------

def op_stat(msg, fds):
    return {"entry": entry(msg["path"])}


def op_listdir(msg, fds):
    """Like envd's walkDir: entries below path up to depth, paths under the
    path as requested (a symlinked directory lists under its own name)."""
    path, depth = msg["path"], msg.get("depth") or 1
    real = os.path.realpath(path)
    try:
        if not stat.S_ISDIR(os.stat(real).st_mode):
            raise OpError("not_dir", f"path is not a directory: {path}")
    except OSError as e:
        raise os_error(e, "stat", real, "directory not found: ")
    entries = []

    def walk(dir_real, dir_shown, level):
        try:
            names = sorted(os.listdir(dir_real))
        except OSError as e:
            raise os_error(e, "open", dir_real, f"error reading directory {path}: ")
        for name in names:
            child_real = os.path.join(dir_real, name)
            try:
                ent = entry(child_real)
            except OpError as e:
                if e.kind == "not_found":  # gone meanwhile
                    continue
                raise
            ent["path"] = os.path.join(dir_shown, name)
            entries.append(ent)
            if level < depth and os.path.isdir(child_real) and not os.path.islink(child_real):
                walk(child_real, ent["path"], level + 1)

    walk(real, path, 1)
    return {"entries": entries}


def op_mkdir(msg, fds):
    path = msg["path"]
    if os.path.lexists(path):
        if os.path.isdir(path):
            raise OpError("exists", f"directory already exists: {path}")
        raise OpError("invalid", f"path already exists but it is not a directory: {path}")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise os_error(e, "mkdir", path, "error creating directory: ")
    return {"entry": entry(path)}


def op_move(msg, fds):
    src, dst = msg["source"], msg["destination"]
    try:
        os.makedirs(os.path.dirname(dst) or "/", exist_ok=True)
        os.rename(src, dst)
    except OSError as e:
        raise os_error(e, "rename", f"{src} {dst}", "source file not found: " if e.errno == errno.ENOENT
                       else "error renaming: ")
    return {"entry": entry(dst)}


def op_remove(msg, fds):
    """os.RemoveAll: a missing path is no error; a directory goes whole."""
    path = msg["path"]
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise OpError("internal", str(os_error(e, "unlinkat", path, "error removing file or directory: ")))
    return {}


def op_open(msg, fds):
    """An open file descriptor, handed back over the socket: the fake reads
    or writes the bytes itself (reads: regular files only, as envd serves)."""
    path = msg["path"]
    if msg["mode"] == "r":
        try:
            st = os.stat(path)
        except OSError as e:
            raise os_error(e, "stat", path)
        if stat.S_ISDIR(st.st_mode):
            raise OpError("is_dir", f"path '{path}' is a directory")
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}, [fd]
    try:
        os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
        if os.path.isdir(path):
            raise OpError("is_dir", f"path is a directory: {path}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise OpError("internal", str(os_error(e, "open", path, "error opening file: ")))
    return {}, [fd]


def default_signals():
    """Every signal at SIG_DFL and none blocked, as a real sandbox's
    commands start (envd, started by the VM's init, has nothing ignored or
    blocked to pass on to them). Without this a command would inherit what
    the fake inherited through bubblewrap and this agent: a fake started
    with `... &` from a script has SIGINT and SIGQUIT ignored, and Python
    ignores SIGPIPE and SIGXFSZ; a program started so could never be
    stopped by them. For the child, after fork, before exec."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # one the C library keeps for itself
            pass
    # 32 and 33, which glibc keeps for its threads and refuses to set, can still be
    # inherited ignored (a test harness's doing); only the system call resets them
    for sig in (32, 33):
        raw_default(sig)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def raw_default(sig):
    """rt_sigaction(sig, SIG_DFL) by the system call itself (x86-64 and arm64: a
    struct of handler, flags, restorer and a 64-bit mask, all zero for SIG_DFL)."""
    numbers = {"x86_64": 13, "aarch64": 134}
    nr = numbers.get(os.uname().machine)
    if nr is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    act = (ctypes.c_ulong * 4)()  # handler SIG_DFL (0), flags, restorer, mask
    libc.syscall(ctypes.c_long(nr), ctypes.c_long(sig), ctypes.byref(act), None,
                 ctypes.c_long(8))


def op_spawn(msg, fds):
    """Start a command as envd does: in its own session (so a signal can
    reach the whole process group), with every signal at its default
    (default_signals()), through `/bin/sh -c 'exec "$@"'` (so a
    missing program is sh's exit 127, not a failed start), with exactly the
    environment given. fds: stdin, stdout, stderr (-1 in msg: /dev/null)."""
    cwd = msg["cwd"]
    if not os.path.isdir(cwd):
        raise OpError("invalid", f"cwd '{cwd}' does not exist")
    fds = list(fds)
    std, opened = [], []
    for want in msg["fds"]:  # which of 0, 1, 2 came over the socket
        if not want:
            opened.append(os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC))
        std.append(fds.pop(0) if want else opened[-1])
    argv = ["/bin/sh", "-c", 'exec "$@"', "--"] + msg["argv"]
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            for target, fd in enumerate(std):
                os.dup2(fd, target, inheritable=True)
            os.closerange(3, 1 << 16)
            default_signals()
            os.chdir(cwd)
            os.execve(argv[0], argv, msg["env"])
        finally:
            os._exit(127)
    for fd in opened:  # the fds received handle() closes
        os.close(fd)
    started.add(pid)
    return {"pid": pid}


def op_signal(msg, fds):
    """The signal to the command's process group (its session), or to the
    process alone with "group": false."""
    pid, sig = msg["pid"], msg["signal"]
    try:
        if msg.get("group", True):
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        raise OpError("not_found", f"process with pid {pid} not found")
    except OSError as e:
        raise OpError("internal", f"error sending signal: {e}")
    return {}


OPS = {"stat": op_stat, "listdir": op_listdir, "mkdir": op_mkdir, "move": op_move,
       "remove": op_remove, "open": op_open, "spawn": op_spawn, "signal": op_signal}


def handle(msg, fds):
    out_fds = []
    try:
        result = OPS[msg["op"]](msg, fds)
        if isinstance(result, tuple):
            result, out_fds = result
        reply = dict(result, id=msg["id"])
    except OpError as e:
        reply = {"id": msg["id"], "error": {"kind": e.kind, "message": str(e)}}
    except Exception as e:  # a bug here must not take the sandbox down
        reply = {"id": msg["id"], "error": {"kind": "internal", "message": repr(e)}}
    finally:
        for fd in fds:
            os.close(fd)
    send(reply, out_fds)
    for fd in out_fds:
        os.close(fd)


def reap():
    """Report the exit of every command of ours that ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in started:
            started.discard(pid)
            send({"event": "exit", "pid": pid, "status": status})


def main():
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    send({"event": "ready", "pid": os.getpid()})
    while True:
        for key, _ in sel.select():
            if key.fileobj is sock:
                msg, fds = receive()
                if msg is None:  # the fake is gone: so is the sandbox
                    os._exit(0)
                handle(msg, fds)
            else:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                reap()


main()
