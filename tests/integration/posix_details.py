#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""posix_details.py DIR - POSIX details the differential exerciser
(posix_diff.c) found smuxfs answering differently from ext4, each as a
small scenario run in DIR. Prints one line per scenario: its name and
what the calls returned (modes, sizes, errno names, booleans). The test
(test_posix_details.sh) runs it on a plain directory and on a mount and
compares the lines, so what is expected is what the local filesystem
does, not what this file says."""
import errno
import os
import stat
import subprocess
import sys
import time

D = sys.argv[1]
os.umask(0)
out = []


def p(name):
    return os.path.join(D, name)


def res(fn):
    """The result of fn(), or the errno name it raised."""
    try:
        r = fn()
        return "ok" if r is None else str(r)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def two_names(a, b, size):
    """A file of @size bytes with the names @a and @b (hard links)."""
    with open(p(a), "w") as f:
        f.write("a" * size)
    os.link(p(a), p(b))


def mode(path):
    return "%o" % stat.S_IMODE(os.lstat(path).st_mode)


def scenario(name, fn):
    try:
        out.append("%s %s" % (name, fn()))
    except OSError as e:
        out.append("%s raised %s" % (name, errno.errorcode.get(e.errno)))


def fifo_setid():
    os.mkfifo(p("f1"), 0o7000)
    os.mkfifo(p("f2"), 0o2775)
    return "%s %s" % (mode(p("f1")), mode(p("f2")))


def chown_unchanged():
    r = []
    for name, m in (("c1", 0o7000), ("c2", 0o6755)):
        open(p(name), "w").close()
        os.chmod(p(name), m)
        os.chown(p(name), -1, -1)
        r.append(mode(p(name)))
    os.mkdir(p("cd"))
    os.chmod(p("cd"), 0o2755)
    os.chown(p("cd"), -1, -1)
    r.append(mode(p("cd")))
    # a FIFO's too (posix_diff seed 20 with FIFOs in)
    os.mkfifo(p("cf"), 0o6777)
    os.chown(p("cf"), -1, -1)
    r.append(mode(p("cf")))
    return " ".join(r)


def fsync_unlinked():
    with open(p("u1"), "w") as f:
        f.write("x")
    fd = os.open(p("u1"), os.O_RDONLY)
    os.unlink(p("u1"))
    r = "%s %s" % (res(lambda: os.fsync(fd)), res(lambda: os.fdatasync(fd)))
    os.close(fd)
    return r


def unlinked_owner():
    with open(p("o1"), "w") as f:
        f.write("x")
    os.chown(p("o1"), 65534, 65534)
    fd = os.open(p("o1"), os.O_RDWR)
    os.unlink(p("o1"))
    st = os.fstat(fd)
    os.close(fd)
    return "%d:%d nlink %d" % (st.st_uid, st.st_gid, st.st_nlink)


def unlinked_size_after_writer():
    with open(p("s1"), "w") as f:
        f.write("y" * 100)
    r = os.open(p("s1"), os.O_RDONLY)
    w = os.open(p("s1"), os.O_WRONLY)
    os.unlink(p("s1"))
    os.ftruncate(w, 10)
    os.close(w)
    os.utime(r, (1000000000, 1000000000))
    size = os.fstat(r).st_size
    os.close(r)
    return "size %d" % size


def replaced_reader():
    with open(p("r1"), "w") as f:
        f.write("z" * 100)
    os.chmod(p("r1"), 0o644)
    with open(p("r2"), "w") as f:
        f.write("new")
    r = os.open(p("r1"), os.O_RDONLY)
    w = os.open(p("r1"), os.O_WRONLY)
    os.ftruncate(w, 10)
    os.fchmod(w, 0o600)
    os.close(w)
    os.rename(p("r2"), p("r1"))
    st = os.fstat(r)
    got = os.pread(r, 100, 0)
    os.close(r)
    return "size %d mode %o nlink %d read %d" % (
        st.st_size, stat.S_IMODE(st.st_mode), st.st_nlink, len(got))


def open_dir_renamed():
    os.makedirs(p("m1/m2/x"))
    fd = os.open(p("m1/m2"), os.O_RDONLY | os.O_DIRECTORY)
    os.rename(p("m1"), p("m9"))
    os.mkdir(p("m9/m2/y"))
    names = sorted(os.listdir(fd))
    os.close(fd)
    return " ".join(names)


def removed_dir():
    os.mkdir(p("rd"))
    os.chmod(p("rd"), 0o750)
    os.mkdir(p("rd2"))
    os.mkdir(p("rd3"))
    fd = os.open(p("rd"), os.O_RDONLY | os.O_DIRECTORY)
    fd2 = os.open(p("rd2"), os.O_RDONLY | os.O_DIRECTORY)
    os.rmdir(p("rd"))
    os.rename(p("rd3"), p("rd2"))  # an empty directory replaced
    st = os.fstat(fd)
    r = ["%o nlink %d" % (st.st_mode, st.st_nlink),
         res(lambda: os.fchmod(fd, 0o700)),
         "%o" % os.fstat(fd).st_mode,
         res(lambda: os.utime(fd, (1000000000, 1000000000))),
         "%d" % os.fstat(fd).st_mtime,
         " ".join(os.listdir(fd)) or "-", res(lambda: os.fsync(fd)),
         "%o nlink %d" % (os.fstat(fd2).st_mode, os.fstat(fd2).st_nlink)]
    os.close(fd)
    os.close(fd2)
    return " ".join(r)


def link_chmod_open():
    # two hundred other files open beside (every other name is looked at)
    others = [os.open(p("lo%d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
              for i in range(200)]
    open(p("l1"), "w").close()
    os.chmod(p("l1"), 0o755)
    os.link(p("l1"), p("l2"))
    fd = os.open(p("l2"), os.O_WRONLY)
    os.write(fd, b"d\n")
    os.chmod(p("l1"), 0o1777)
    r = "%s %o" % (mode(p("l2")), stat.S_IMODE(os.fstat(fd).st_mode))
    os.close(fd)
    for o in others:
        os.close(o)
    return r + " after close " + mode(p("l2"))


def link_writer_nameless():
    # a file of two names, open through one that is then unlinked: what
    # is written through the descriptor shows through the other name
    # (posix_diff seed 16)
    two_names("w1", "w2", 1000)
    fd = os.open(p("w2"), os.O_RDWR)
    os.pwrite(fd, b"b" * 100, 2000)
    os.unlink(p("w2"))
    os.pwrite(fd, b"c" * 100, 3000)
    first = os.stat(p("w1")).st_size
    os.pwrite(fd, b"d" * 100, 500)
    os.pwrite(fd, b"e" * 100, 5000)
    second = os.stat(p("w1")).st_size
    with open(p("w1"), "rb") as f:
        data = f.read()
    os.close(fd)
    return "%d %d %d %d %d" % (first, second, len(data), data.count(b"d"),
                               data.count(b"e"))


def gone_creator_owner():
    # the owner a creator gave its file and had not committed yet, shown
    # by another descriptor once the name went (unlink, rename over it;
    # posix_diff seed 16)
    r = []
    for how in ("unlink", "rename"):
        w = os.open(p("co"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o775)
        os.write(w, b"x" * 100)
        rd = os.open(p("co"), os.O_RDONLY)
        os.fchown(w, 1000, 65534)
        if how == "unlink":
            os.unlink(p("co"))
        else:
            open(p("co2"), "w").close()
            os.rename(p("co2"), p("co"))
        os.fchmod(rd, 0o644)
        st = os.fstat(rd)
        r.append("%s %d:%d" % (how, st.st_uid, st.st_gid))
        os.close(w)
        st = os.fstat(rd)
        r.append("%d:%d" % (st.st_uid, st.st_gid))
        os.close(rd)
    return " ".join(r)


def nameless_links_size():
    # a file of two names, each open for writing, both names removed:
    # what one descriptor writes past the end shows in the other's fstat
    # (posix_diff seed 37)
    two_names("z1", "z2", 1000)
    w1 = os.open(p("z1"), os.O_RDWR)
    w2 = os.open(p("z2"), os.O_RDWR)
    os.unlink(p("z2"))
    os.unlink(p("z1"))
    os.pwrite(w1, b"b" * 100, 5000)
    os.pwrite(w2, b"c" * 10, 10)
    r = "%d %d" % (os.fstat(w2).st_size, os.fstat(w1).st_size)
    os.close(w1)
    os.close(w2)
    return r


def link_chown_open():
    # chown through one name clears the set-id bits another open name of
    # the file shows (posix_diff seed 29)
    open(p("k1"), "w").close()
    os.chmod(p("k1"), 0o6750)
    os.link(p("k1"), p("k2"))
    fd = os.open(p("k2"), os.O_WRONLY)
    os.write(fd, b"d\n")
    os.chown(p("k1"), 65534, 1000)
    r = "%s %o" % (mode(p("k2")), stat.S_IMODE(os.fstat(fd).st_mode))
    os.close(fd)
    return r + " after close " + mode(p("k2"))


def nameless_link_chmod():
    # a file open through a name a rename replaced, changed through its
    # other name: fstat of the descriptor shows the change (posix_diff
    # seed 22)
    open(p("q1"), "w").close()
    os.chmod(p("q1"), 0o1777)
    os.link(p("q1"), p("q2"))
    fd = os.open(p("q2"), os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"x")
    open(p("q3"), "w").close()
    os.rename(p("q3"), p("q2"))
    os.chmod(p("q1"), 0o755)
    os.chown(p("q1"), 1000, 1000)
    st = os.fstat(fd)
    os.close(fd)
    return "%o %d:%d %d" % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                            st.st_size)


def nameless_link_truncate():
    # a file open under two names, one replaced by a rename: what the
    # nameless descriptor truncates shows through the other name's open
    # file at once (posix_diff seed 22)
    two_names("t1", "t2", 1000)
    w2 = os.open(p("t2"), os.O_WRONLY)
    open(p("t3"), "w").close()
    os.rename(p("t3"), p("t2"))
    w1 = os.open(p("t1"), os.O_WRONLY)
    os.ftruncate(w1, 500)
    first = os.stat(p("t1")).st_size
    os.ftruncate(w2, 3000)
    second = os.stat(p("t1")).st_size
    os.pwrite(w2, b"x", 4000)
    third = os.fstat(w1).st_size
    os.close(w1)
    os.close(w2)
    return "%d %d %d" % (first, second, third)


def nameless_setattr_link():
    # fchmod, fchown and futimens through a descriptor whose name was
    # unlinked show through the file's other name (posix_diff seed 16)
    two_names("s1", "s2", 100)
    os.chmod(p("s1"), 0o4755)
    fd = os.open(p("s2"), os.O_RDWR)
    os.unlink(p("s2"))
    os.fchmod(fd, 0o640)
    os.fchown(fd, 1000, 1000)
    os.utime(fd, ns=(1000000000000000000, 1100000000000000000))
    st = os.stat(p("s1"))
    os.close(fd)
    st2 = os.stat(p("s1"))
    return "%o %d:%d %d %d after close %o %d:%d %d" % (
        stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_atime_ns,
        st.st_mtime_ns, stat.S_IMODE(st2.st_mode), st2.st_uid, st2.st_gid,
        st2.st_mtime_ns)


def nameless_reader_chmod():
    # fchmod and fchown through a reader whose name was unlinked show
    # through the file's other name (posix_diff seed 45; one copy only:
    # a reader holds one replica of a mirror)
    two_names("r1", "r2", 100)
    fd = os.open(p("r2"), os.O_RDONLY)
    os.unlink(p("r2"))
    os.fchmod(fd, 0o2750)
    os.fchown(fd, 1000, -1)
    st = os.stat(p("r1"))
    os.close(fd)
    return "%o %d:%d" % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


def link_truncate_other():
    # a file of two names open for writing under each, truncated through
    # one, the other name then replaced by a rename: stat of the first
    # shows the file's size (posix_diff seed 47)
    w1 = os.open(p("u1"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.link(p("u1"), p("u2"))
    w2 = os.open(p("u2"), os.O_WRONLY | os.O_APPEND)
    os.truncate(p("u1"), 27513)
    os.pwrite(w1, b"b" * 7011, 36852)
    os.read(w1, 14164)
    first = os.fstat(w1).st_size
    os.ftruncate(w2, 1403)
    w3 = os.open(p("u2"), os.O_RDWR | os.O_APPEND)
    open(p("u3"), "w").close()
    os.rename(p("u3"), p("u2"))
    os.write(w1, b"d" * 2548)
    os.close(w3)
    r = "%d %d %d" % (first, os.stat(p("u1")).st_size, os.fstat(w1).st_size)
    os.close(w1)
    os.close(w2)
    return r


def rename_same_file():
    # rename of one name of a file over another name of it does nothing:
    # both names stay, and a descriptor whose name went keeps its link
    # count (posix_diff seed 56)
    two_names("v1", "v2", 10)
    os.link(p("v1"), p("v3"))
    fd = os.open(p("v3"), os.O_RDWR)
    os.unlink(p("v3"))
    os.rename(p("v1"), p("v2"))
    r = "%s %s %d %d" % (os.path.exists(p("v1")), os.path.exists(p("v2")),
                         os.stat(p("v2")).st_nlink, os.fstat(fd).st_nlink)
    os.close(fd)
    return r


def rename_onto_open_link():
    # rename of one name of a file over another name of it that is open
    # for writing: nothing changes, and the open descriptor goes on -
    # fstat, a write, fchmod and futimens through it (posix_diff seed 4
    # with exchange in the mix; the mount answered fstat ESTALE)
    two_names("o1", "o2", 10)
    fd = os.open(p("o2"), os.O_WRONLY | os.O_APPEND)
    os.rename(p("o1"), p("o2"))
    os.write(fd, b"more")
    st = os.fstat(fd)
    r = ["%d %d" % (st.st_size, st.st_nlink)]
    r.append(res(lambda: os.fchmod(fd, 0o600)))
    r.append(res(lambda: os.utime(fd, (1000000000, 1000000000))))
    st = os.fstat(fd)
    r.append("%o %d" % (stat.S_IMODE(st.st_mode), st.st_mtime))
    os.close(fd)
    for n in ("o1", "o2"):
        st = os.stat(p(n))
        r.append("%s %d %d %o %d" % (n, st.st_size, st.st_nlink,
                                     stat.S_IMODE(st.st_mode), st.st_mtime))
    return " ".join(r)


def nameless_chmod_last():
    # a file of two names with a writer open by each; one name goes;
    # fchmod through the named writer, then through the nameless one:
    # the last one stays when both close (posix_diff seed 5)
    two_names("m1", "m2", 10)
    fa = os.open(p("m1"), os.O_WRONLY | os.O_APPEND)
    fb = os.open(p("m2"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o777)
    os.write(fa, b"x")
    os.write(fb, b"y")
    os.unlink(p("m1"))
    os.fchmod(fb, 0o200)
    os.write(fb, b"y")
    os.fchmod(fa, 0o444)
    r = [mode(p("m2"))]
    os.close(fa)
    r.append(mode(p("m2")))
    os.close(fb)
    r.append(mode(p("m2")))
    return " ".join(r)


def removed_cwd():
    # `ls` in a working directory that was removed: the open succeeds and
    # lists nothing, fstat shows no links (libfuse answered ESTALE)
    os.mkdir(p("cw"))
    old = os.getcwd()
    os.chdir(p("cw"))
    try:
        os.rmdir(p("cw"))
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        r = "%s %d %s" % (os.listdir(fd), os.fstat(fd).st_nlink,
                          stat.S_ISDIR(os.fstat(fd).st_mode))
        os.fsync(fd)
        os.close(fd)
        ls = subprocess.run(["ls", "-a"], capture_output=True, text=True)
        r += " ls %d %r" % (ls.returncode, ls.stdout)
        r += " " + res(lambda: open("f", "w"))
    finally:
        os.chdir(old)
    return r


def link_other_writer():
    # a file of two names, open for writing through each: what one
    # descriptor changes (O_TRUNC, a write) shows through the other name
    # and its descriptor (posix_diff seed 12, failover)
    def cat(name):
        with open(p(name), "rb") as f:
            return counts(f.read())

    def counts(b):
        return "%d:%d/%d/%d" % (len(b), b.count(b"a"), b.count(b"b"),
                                b.count(b"c"))

    fa = os.open(p("ow1"), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fa, b"a" * 3000)
    os.link(p("ow1"), p("ow2"))
    fb = os.open(p("ow2"), os.O_RDWR | os.O_TRUNC)
    os.pwrite(fb, b"b" * 100, 1000)
    r = [cat("ow1"), counts(os.pread(fa, 10000, 0))]
    os.pwrite(fa, b"c" * 100, 2000)
    r += [cat("ow2"), counts(os.pread(fb, 10000, 0))]
    os.close(fa)
    os.close(fb)
    return " ".join(r + [cat("ow1")])


def nameless_other_chown():
    # a file of two names open through one, which is then unlinked, its
    # descriptor's fchown kept: a chown and chmod through the other name
    # show in fstat of the descriptor (posix_diff seed 12, step 440); a
    # reader beside a writer, and alone
    r = []
    for writer in (True, False):
        two_names("oc1", "oc2", 100)
        w = os.open(p("oc1"), os.O_WRONLY) if writer else None
        rd = os.open(p("oc1"), os.O_RDONLY)
        os.unlink(p("oc1"))
        os.fchown(rd, 65534, 65534)
        os.chown(p("oc2"), 0, -1)
        os.chmod(p("oc2"), 0o604)
        st = os.fstat(rd)
        r.append("%d:%d %o" % (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)))
        if w is not None:
            os.close(w)
        os.close(rd)
        os.unlink(p("oc2"))
    return " ".join(r)


def dir_nlink():
    os.mkdir(p("n"))
    os.mkdir(p("n/s"))
    a = os.stat(p("n")).st_nlink
    os.rmdir(p("n/s"))
    b = os.stat(p("n")).st_nlink
    return "%d %d" % (a, b)


def special_unlinked():
    """A FIFO and a socket open (O_PATH for the socket) when their names
    go: fstat shows them (type, mode, owner, nlink 0), fchmod of the
    FIFO's descriptor works and shows, and the FIFO still carries data."""
    import socket
    os.mkfifo(p("sf"), 0o640)
    fd = os.open(p("sf"), os.O_RDWR)
    s = socket.socket(socket.AF_UNIX)
    s.bind(p("ss"))
    fds = os.open(p("ss"), os.O_PATH)
    os.unlink(p("sf"))
    os.unlink(p("ss"))

    def show(f):
        st = os.fstat(f)
        return "%o nlink %d uid %d" % (st.st_mode, st.st_nlink, st.st_uid)
    r = [res(lambda: show(fd)), res(lambda: show(fds)),
         res(lambda: os.fchmod(fd, 0o600)), res(lambda: show(fd))]
    os.write(fd, b"x")
    r.append(os.read(fd, 1).decode())
    os.close(fd)
    os.close(fds)
    s.close()
    return " ".join(r)


def special_unlinked_chown():
    """fchown by root of a FIFO whose name went: setuid and (with the
    group's execute bit) setgid cleared, as chown of any non-directory
    (posix_diff seed 23 with FIFOs in: the mount kept 6777)."""
    os.mkfifo(p("sc"), 0o6777)
    fd = os.open(p("sc"), os.O_RDONLY | os.O_NONBLOCK)
    os.unlink(p("sc"))
    os.fchown(fd, 1000, 65534)
    st = os.fstat(fd)
    os.close(fd)
    return "%o %d %d" % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


def nameless_writer_after_writer():
    """Two writers and a reader (opened last) of a file whose name went;
    one writer grows the file and closes, the other writes on: fstat of
    the writer and of the reader show the size now (posix_diff seed 32:
    they showed the size the closed writer left)."""
    with open(p("nw"), "w") as f:
        f.write("a" * 5000)
    w0 = os.open(p("nw"), os.O_RDWR)
    w2 = os.open(p("nw"), os.O_RDWR)
    rd = os.open(p("nw"), os.O_RDONLY)
    os.unlink(p("nw"))
    os.ftruncate(w0, 8000)
    os.close(w0)
    os.pwrite(w2, b"b" * 1000, 8000)
    r = ["%d %d" % (os.fstat(w2).st_size, os.fstat(rd).st_size)]
    os.close(w2)
    r.append("%d" % os.fstat(rd).st_size)
    os.close(rd)
    return " ".join(r)


def rename_same_file_unlink():
    """A file of two names, a reader and a writer open by one of them;
    a rename of that name over the other (nothing happens), an unlink of
    the other name, the file renamed back, a chmod: fstat of both
    descriptors all along (posix_diff seed 1 with FIFOs in: ESTALE after
    the unlink, which the kernel sent through the node the rename had
    moved, whose descriptors the daemon still knew by the first name)."""
    os.mkdir(p("rs"))
    two_names("rb", "rs/ra", 10)
    os.chmod(p("rb"), 0o640)
    rd = os.open(p("rb"), os.O_RDONLY)
    wr = os.open(p("rb"), os.O_WRONLY | os.O_APPEND)
    r = []

    def both(tag):
        for fd in (rd, wr):
            r.append("%s %s" % (tag, res(lambda: "%o/%d/%d" % (
                stat.S_IMODE(os.fstat(fd).st_mode), os.fstat(fd).st_nlink,
                os.fstat(fd).st_size))))

    os.rename(p("rb"), p("rs/ra"))
    both("noop")
    os.stat(p("rb"))
    os.unlink(p("rs/ra"))
    both("unlinked")
    os.write(wr, b"more")
    both("written")
    os.rename(p("rb"), p("rs/ra"))
    os.chmod(p("rs/ra"), 0o604)
    both("chmod")
    r.append(res(lambda: os.fchmod(rd, 0o600)))
    r.append(mode(p("rs/ra")))
    os.close(rd)
    os.close(wr)
    with open(p("rs/ra")) as f:
        r.append(f.read())
    return " ".join(r)


def epoch_times():
    # times at the epoch (touch -d @0, SOURCE_DATE_EPOCH=0 builds, a copy
    # of such files) are times like any other: 0 is not "unknown" (s39-t2)
    open(p("e0"), "w").close()
    os.mkdir(p("e0d"))
    os.symlink("e0", p("e0l"))
    r = []
    for name in ("e0", "e0d", "e0l"):
        os.utime(p(name), ns=(0, 0), follow_symlinks=False)
        st = os.lstat(p(name))
        r.append("%s %d/%d" % (name, st.st_mtime_ns, st.st_atime_ns))
    os.utime(p("e0"), ns=(5, 0))
    st = os.stat(p("e0"))
    r.append("atime-only %d/%d" % (st.st_mtime_ns, st.st_atime_ns))
    return " ".join(r)


def utime_then_write():
    # an open file made dirty (ftruncate through its descriptor), then a
    # utime by name, then a write through the descriptor: the write moves
    # mtime to now, as on ext4, also while the file stays open (s39-t2:
    # on one copy the write passed the daemon by and stat kept the utime)
    r = []
    for name, write in (("uw1", True), ("uw2", False)):
        with open(p(name), "wb") as f:
            f.write(b"a" * 100)
        fd = os.open(p(name), os.O_RDWR)
        os.ftruncate(fd, 100)
        os.utime(p(name), (946684800, 946684800))
        if write:
            os.pwrite(fd, b"b" * 100, 0)
        open_t = os.stat(p(name)).st_mtime
        os.close(fd)
        closed_t = os.stat(p(name)).st_mtime
        r.append("%s open:%s closed:%s" % (
            name, "now" if open_t > 10**9 else int(open_t),
            "now" if closed_t > 10**9 else int(closed_t)))
    return " ".join(r)


def fsync_clean_mtime():
    # fsync of a descriptor that wrote nothing (`sync FILE`: read-only;
    # or read-write) makes the file durable, its mtime stays (s43-t1:
    # mirror and shield set it to now on every replica), also once the
    # attributes are asked again (attr_timeout) and after a later close
    r = []
    for name, flags in (("fc1", os.O_RDONLY), ("fc2", os.O_RDWR)):
        with open(p(name), "wb") as f:
            f.write(b"x" * 10)
        os.utime(p(name), ns=(1, 300000000000))
        fd = os.open(p(name), flags)
        os.fsync(fd)
        os.close(fd)
    time.sleep(1.5)
    for name in ("fc1", "fc2"):
        r.append("%s %d" % (name, os.stat(p(name)).st_mtime_ns))
    return " ".join(r)


def otrunc_mtime():
    # open(O_TRUNC) of a file with an old mtime: stat while it is open
    # shows size 0 and mtime now, as ext4 does (s39-t2: mirror kept the
    # old mtime until close)
    with open(p("ot"), "wb") as f:
        f.write(b"x" * 10)
    os.utime(p("ot"), ns=(1, 1))
    fd = os.open(p("ot"), os.O_WRONLY | os.O_TRUNC)
    st = os.stat(p("ot"))
    r = "open size %d mtime %s" % (
        st.st_size, "now" if st.st_mtime > 10**9 else st.st_mtime_ns)
    os.close(fd)
    st = os.stat(p("ot"))
    return r + " closed mtime %s" % (
        "now" if st.st_mtime > 10**9 else st.st_mtime_ns)


def rename_same_file_truncate():
    """Two names of one file, a writer open by each; a rename of one
    over the other (nothing happens), then truncate(2) by each name
    (s39-t2: ESTALE by the name the rename left, while both writers were
    open: the kernel sent it through the node the rename had moved)."""
    two_names("td", "tc", 0)
    wd = os.open(p("td"), os.O_WRONLY)
    wc = os.open(p("tc"), os.O_RDWR)
    os.rename(p("td"), p("tc"))
    r = [res(lambda: os.truncate(p("tc"), 5000))]
    st = os.stat(p("tc"))
    r.append("%d/%d fd:%d" % (st.st_size, st.st_nlink, os.fstat(wc).st_size))
    r.append(res(lambda: os.truncate(p("td"), 10)))
    r.append("%d %d" % (os.fstat(wd).st_size, os.stat(p("tc")).st_size))
    os.close(wd)
    os.close(wc)
    r.append(res(lambda: os.truncate(p("tc"), 7)))
    r.append("%d" % os.stat(p("td")).st_size)
    return " ".join(r)


def nameless_truncate_proc():
    """truncate(2) of /proc/self/fd/N of an open file whose name is gone:
    the kernel sends it without the handle."""
    r = []
    for name, links in (("nt1", False), ("nt2", True)):
        fd = os.open(p(name), os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"x" * 100)
        if links:
            os.link(p(name), p(name + "l"))
        os.unlink(p(name))
        r.append(res(lambda: os.truncate("/proc/self/fd/%d" % fd, 7)))
        r.append("%d" % os.fstat(fd).st_size)
        os.close(fd)
        if links:
            r.append("%d" % os.stat(p(name + "l")).st_size)
    return " ".join(r)


for fn in (fsync_clean_mtime, rename_same_file_truncate, nameless_truncate_proc, otrunc_mtime, utime_then_write, epoch_times, fifo_setid, chown_unchanged, fsync_unlinked, unlinked_owner,
           unlinked_size_after_writer, replaced_reader, open_dir_renamed,
           removed_dir, link_chmod_open, link_writer_nameless,
           gone_creator_owner, nameless_links_size, link_chown_open,
           nameless_link_chmod, nameless_link_truncate,
           nameless_setattr_link, nameless_reader_chmod,
           link_truncate_other, rename_same_file, rename_onto_open_link,
           nameless_chmod_last, removed_cwd, link_other_writer,
           nameless_other_chown, dir_nlink, special_unlinked,
           nameless_writer_after_writer, rename_same_file_unlink,
           special_unlinked_chown):
    only = os.environ.get("SMUX_DETAILS_ONLY")
    if only and fn.__name__ not in only.split(","):
        continue
    if fn.__name__ in os.environ.get("SMUX_DETAILS_SKIP", "").split(","):
        continue
    scenario(fn.__name__, fn)
print("\n".join(out))
