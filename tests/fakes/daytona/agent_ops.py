# tests/fakes/daytona/agent_ops.py - what the fake Daytona's sandbox agent does
# besides what the fake E2B's does.
#
# Not a module of its own: fake_daytona.py appends this source to that of
# tests/fakes/e2b/sandbox_init.py (the agent that runs in each sandbox, inside
# bubblewrap, and does there whatever must happen in the sandbox's view: it
# starts and signals processes, and does the file operations, so that a
# symlink a command made cannot lead the fake, root on the host, out of the
# sandbox), before its main() runs. It uses that agent's names (os, stat,
# errno, shutil, OpError, OPS, go_mode_string) and adds to OPS the file
# operations of Daytona's daemon (its /files routes) and the process-tree
# signalling of its sessions.
#
# Errors carry the words of Go's os.PathError ("stat /x: no such file or
# directory"), as the daemon's do, and a kind: not_found, permission, is_dir,
# not_recursive, other.
import fcntl


def d_error(e, op, path):
    kind = {errno.ENOENT: "not_found", errno.EACCES: "permission",
            errno.EPERM: "permission"}.get(e.errno, "other")
    return OpError(kind, f"{op} {path}: {(e.strerror or str(e)).lower()}")


def d_stat(path, name=None):
    """What the daemon's getFileInfo reads: os.Stat (symlinks followed)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise d_error(e, "stat", path)
    return {"name": name or os.path.basename(path.rstrip("/")) or "/", "size": st.st_size,
            "mode": go_mode_string(st.st_mode), "perm": stat.S_IMODE(st.st_mode) & 0o777,
            "isDir": stat.S_ISDIR(st.st_mode), "mtime_ns": st.st_mtime_ns,
            "uid": st.st_uid, "gid": st.st_gid}


def op_dinfo(msg, fds):
    return {"info": d_stat(msg["path"])}


def op_dlist(msg, fds):
    """os.ReadDir (sorted by name), then the info of each entry; an entry
    gone meanwhile (or a dangling symlink) is left out, as the daemon does."""
    path = msg["path"]
    if not os.path.lexists(path):
        raise OpError("not_found", f"open {path}: no such file or directory")
    if not os.path.isdir(path):
        raise OpError("other", f"readdirent {path}: not a directory")
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise d_error(e, "open", path)
    infos = []
    for name in names:
        try:
            infos.append(d_stat(os.path.join(path, name), name))
        except OpError:
            pass
    return {"infos": infos}


def op_ddelete(msg, fds):
    """os.Stat, then os.RemoveAll (recursive) or os.Remove."""
    path = msg["path"]
    info = d_stat(path)
    if info["isDir"] and not msg.get("recursive"):
        raise OpError("not_recursive", "cannot delete directory without recursive flag")
    try:
        if msg.get("recursive") and info["isDir"] and not os.path.islink(path):
            shutil.rmtree(path)
        elif info["isDir"] and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise d_error(e, "unlinkat", path)
    return {}


def mkdir_all(path, mode):
    """os.MkdirAll: every missing directory with mode (less the umask); an
    existing directory is no error, anything else in the way is."""
    if os.path.isdir(path):
        return
    if os.path.lexists(path):
        raise OpError("other", f"mkdir {path}: not a directory")
    parent = os.path.dirname(path.rstrip("/"))
    if parent and parent != path:
        mkdir_all(parent, mode)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not os.path.isdir(path):
            raise OpError("other", f"mkdir {path}: not a directory")
    except OSError as e:
        raise d_error(e, "mkdir", path)


def op_dmkdir(msg, fds):
    mkdir_all(msg["path"], msg.get("mode", 0o755))
    return {}


def op_dopen(msg, fds):
    """A file opened for the fake to read or write itself (its fd comes
    back over the socket). Reading: not a directory; opened non-blocking
    so that a FIFO cannot hang the agent (the daemon would block on it).
    Writing: as os.Create after os.MkdirAll of the parent (0755), mode
    perm (0666 by default) less the umask, truncated."""
    path = msg["path"]
    if msg["mode"] == "r":
        info = d_stat(path)
        if info["isDir"]:
            raise OpError("is_dir", f"read {path}: is a directory")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            raise d_error(e, "open", path)
        return {"size": info["size"], "mtime_ns": info["mtime_ns"]}, [fd]
    mkdir_all(os.path.dirname(path) or "/", 0o755)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC,
                     msg.get("perm", 0o666))
    except OSError as e:
        raise d_error(e, "open", path)
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    return {}, [fd]


def children_of(pid):
    """The pids whose parent is pid (this PID namespace's /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def op_dtree_signal(msg, fds):
    """A signal to the process group of pid and to every descendant (those
    that left the group too), as the daemon's session Delete does."""
    pid, sig = msg["pid"], msg["signal"]
    try:
        os.killpg(pid, sig)
    except OSError:
        pass

    def walk(p):
        for child in children_of(p):
            walk(child)
            try:
                os.kill(child, sig)
            except OSError:
                pass
    walk(pid)
    return {}


def op_dchildren(msg, fds):
    """Whether pid still runs and has children (waitForTermination)."""
    pid = msg["pid"]
    alive = os.path.exists(f"/proc/{pid}")
    return {"alive": alive, "children": children_of(pid) if alive else []}


OPS.update({"dinfo": op_dinfo, "dlist": op_dlist, "ddelete": op_ddelete, "dmkdir": op_dmkdir,
            "dopen": op_dopen, "dtree_signal": op_dtree_signal, "dchildren": op_dchildren})
