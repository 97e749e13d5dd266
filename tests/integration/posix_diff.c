/* SPDX-License-Identifier: MIT */
/*
 * posix_diff.c - a differential POSIX exerciser: the same seeded random
 * sequence of system calls on two trees in lockstep, every result compared.
 *
 *   posix_diff DIR_A DIR_B SEED STEPS
 *
 * DIR_A is a directory on a local filesystem (ext4, tmpfs), DIR_B one on
 * the filesystem under test (a smuxfs mount). Each works in its own new
 * subdirectory w/ (so a step never touches DIR itself), over a small
 * namespace (a b c d1 d2 and names below d1 and d2 down to depth 3) so
 * that operations collide: open with random flags (O_CREAT O_EXCL O_TRUNC
 * O_APPEND O_DIRECTORY O_NOFOLLOW) and modes (set-id and sticky bits too),
 * write, pwrite, read, pread, lseek (SEEK_DATA/SEEK_HOLE too), ftruncate,
 * truncate, fsync, fdatasync, fstat, stat, lstat, mkdir, rmdir, unlink,
 * rename and renameat2 (RENAME_NOREPLACE, RENAME_EXCHANGE), link, symlink,
 * readlink, chmod, fchmod, chown, fchown, lchown, utimensat and futimens
 * (explicit times, UTIME_NOW, UTIME_OMIT), access, mkfifo, fallocate
 * (KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE), readdir by path and through an open
 * directory descriptor, on a table of open descriptors (one array per
 * tree) whose names may have been unlinked or renamed meanwhile.
 *
 * For each step it compares the return value and errno; stat results as
 * type, mode (all 12 bits), nlink, uid, gid and size (st_blocks, st_ino,
 * st_dev and absolute times are not compared: they are the storage's own);
 * whether mtime and ctime of the objects a step names (and their parent
 * directories) changed in the step; the times a utimensat set explicitly,
 * exactly; sorted directory listings; readlink contents; bytes read. Every
 * 10 steps and at the end the whole namespace is compared (lstat,
 * contents, listings, link targets, and which names share an inode).
 * Before every step the clock is let past its last tick, so "changed" is
 * a fact of the step and not of the clock's granularity.
 *
 * Run as root, a second phase (a quarter of STEPS more) runs in a child
 * with uid and gid 1000 or 65534 (chosen by the seed) against what root
 * left: permission errors (EACCES, EPERM) must match too. DIR_B's mount
 * needs allow_other for it; SMUX_DIFF_USER=0 turns the phase off.
 *
 * Environment:
 *   SMUX_DIFF_TRACE=1   on a divergence, also print the last 20 steps;
 *   SMUX_DIFF_TRACE=2   print every step as it runs;
 *   SMUX_DIFF_SKIP=a,b  leave out the named operations (to look past a
 *                       known divergence; the sequence then differs);
 *   SMUX_DIFF_TIMES=0   do not compare which times changed (the same).
 *
 * Exit 0 with counts when both trees agreed at every step; 1 at the first
 * divergence (the step, the operation and both results are printed);
 * 2 on a usage or setup error. Deterministic for a seed. Plain C11 +
 * POSIX (+ Linux renameat2, fallocate), no dependencies.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif
#ifndef FALLOC_FL_ZERO_RANGE
#define FALLOC_FL_ZERO_RANGE 0x10
#endif

#define NSLOT	   6
#define MAX_IO	   8192
#define MAX_OFF	   65536
#define RES_MAX	   16384
#define TRACE_KEEP 20
#define MAX_INV	   6

/* The namespace: collisions are the point. */
static const char *const names[] = {
	"a",	 "b",	    "c",       "d1",	  "d2",	     "d1/a",
	"d1/b",	 "d1/d1",   "d1/d2",   "d2/a",	  "d2/b",    "d2/d1",
	"d2/d2", "d1/d1/a", "d1/d2/a", "d1/d2/b", "d2/d1/a", "d2/d2/b",
};
#define NNAMES	 (sizeof(names) / sizeof(names[0]))
#define NSHALLOW 9 /* names[0..8]: drawn half of the time */

/* Symlink targets: relative and without "..", so they resolve inside the
 * tree wherever the link is moved. */
static const char *const targets[] = {
	"a", "b", "c", "d1", "d2", "d1/a", "d2/d1", "nonexist", ".", "d1/d2/a",
};
#define NTARGETS (sizeof(targets) / sizeof(targets[0]))

static const mode_t modes[] = {
	0,    0644, 0600,  0755, 0777,	04755, 02755, 01777,
	0444, 0200, 06777, 0111, 02775, 07000, 0700,  04000,
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

static const uid_t ids[] = {0, 1000, 65534, (uid_t)-1};

enum {
	OP_OPEN,
	OP_CLOSE,
	OP_WRITE,
	OP_PWRITE,
	OP_READ,
	OP_PREAD,
	OP_LSEEK,
	OP_FTRUNCATE,
	OP_TRUNCATE,
	OP_FSYNC,
	OP_FSTAT,
	OP_STAT,
	OP_MKDIR,
	OP_RMDIR,
	OP_UNLINK,
	OP_RENAME,
	OP_LINK,
	OP_SYMLINK,
	OP_READLINK,
	OP_CHMOD,
	OP_FCHMOD,
	OP_CHOWN,
	OP_FCHOWN,
	OP_UTIMENS,
	OP_FUTIMENS,
	OP_ACCESS,
	OP_MKFIFO,
	OP_FALLOCATE,
	OP_READDIR,
	OP_FREADDIR,
	OP_CAT,
	OP_EXCHANGE,
	NOPS
};

static const char *const opnames[NOPS] = {
	"open",	  "close",    "write",	   "pwrite",	"read",
	"pread",  "lseek",    "ftruncate", "truncate",	"fsync",
	"fstat",  "stat",     "mkdir",	   "rmdir",	"unlink",
	"rename", "link",     "symlink",   "readlink",	"chmod",
	"fchmod", "chown",    "fchown",	   "utimensat", "futimens",
	"access", "mkfifo",   "fallocate", "readdir",	"freaddir",
	"cat",	  "exchange",
};

/* relative weights of the operations */
static const unsigned weights[NOPS] = {
	[OP_OPEN] = 14,	    [OP_CLOSE] = 6,	[OP_WRITE] = 8,
	[OP_PWRITE] = 8,    [OP_READ] = 5,	[OP_PREAD] = 5,
	[OP_LSEEK] = 3,	    [OP_FTRUNCATE] = 4, [OP_TRUNCATE] = 3,
	[OP_FSYNC] = 2,	    [OP_FSTAT] = 4,	[OP_STAT] = 4,
	[OP_MKDIR] = 7,	    [OP_RMDIR] = 4,	[OP_UNLINK] = 5,
	[OP_RENAME] = 9,    [OP_LINK] = 4,	[OP_SYMLINK] = 4,
	[OP_READLINK] = 2,  [OP_CHMOD] = 4,	[OP_FCHMOD] = 2,
	[OP_CHOWN] = 3,	    [OP_FCHOWN] = 2,	[OP_UTIMENS] = 3,
	[OP_FUTIMENS] = 2,  [OP_ACCESS] = 3,	[OP_MKFIFO] = 2,
	[OP_FALLOCATE] = 3, [OP_READDIR] = 3,	[OP_FREADDIR] = 2,
	[OP_CAT] = 3,	    [OP_EXCHANGE] = 2,
};

/* One drawn operation: its arguments are drawn once, run on both trees. */
struct op {
	int kind;
	int p, q;    /* indices into names */
	int slot;    /* descriptor slot */
	int flags;   /* open flags, rename flags, fallocate mode, ... */
	int whence;  /* lseek; stat: 0 stat, 1 lstat; chown: 0/1 l */
	mode_t mode; /* open, mkdir, chmod */
	off_t off;   /* pwrite, pread, lseek, truncate, fallocate */
	size_t len;  /* write, read, fallocate */
	uid_t uid;   /* chown */
	gid_t gid;   /* chown */
	int tgt;     /* symlink target */
	struct timespec ts[2];
	uint64_t dseed; /* data of a write */
	char desc[256];
};

/* The open descriptors: one array per tree. */
struct slot {
	int fd[2];
	char desc[96];
};

static struct slot slots[NSLOT];
static char root[2][4096];
static uint64_t rng_state;
static unsigned long step, total;
static unsigned long counts[NOPS];
static int trace;
static bool skip[NOPS];
/* SMUX_DIFF_SKIP=fifolink: no link(2) of a FIFO (a FIFO of two names is
 * two pipes on a FUSE mount whose every name is its own kernel inode) */
static bool skip_fifo_link;
static const char *phase = "root";

/* Results of the current step, one string per tree. */
static char res[2][RES_MAX];
static size_t rlen[2];

static char trace_ring[TRACE_KEEP][RES_MAX / 4];
static unsigned trace_n;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static size_t below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static bool chance(unsigned pct)
{
	return below(100) < pct;
}

static void setup_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "posix_diff: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void radd(int s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (rlen[s] >= RES_MAX - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(res[s] + rlen[s], RES_MAX - rlen[s], fmt, ap);
	va_end(ap);
	if (n > 0)
		rlen[s] += (size_t)n < RES_MAX - rlen[s]
				   ? (size_t)n
				   : RES_MAX - 1 - rlen[s];
}

/* The result of a call: its value, or -1 and the errno's name. */
static void rc(int s, long v, int err)
{
	if (v < 0)
		radd(s, "-1 %s",
		     strerrorname_np(err) ? strerrorname_np(err) : "E?");
	else
		radd(s, "%ld", v);
}

static const char *path(int s, int idx, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", root[s], idx < 0 ? "" : names[idx]);
	return buf;
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	while (n--)
		h = (h ^ *p++) * 1099511628211ULL;
	return h;
}

static const char *ftype(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return "reg";
	case S_IFDIR:
		return "dir";
	case S_IFLNK:
		return "lnk";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "sock";
	default:
		return "other";
	}
}

/* A directory's st_size is the filesystem's own (POSIX leaves it
 * unspecified; ext4 shows its blocks, tmpfs its entries, smuxfs 0): not
 * compared, as docs/architecture.md says of the s3fs comparison
 * ("directory sizes ... filesystem-specific"). A directory's link count
 * is compared: docs/configuration.md promises ext4's (2 + subdirectories)
 * on file backends. */
static void rsize(int s, const struct stat *st)
{
	if (!S_ISDIR(st->st_mode))
		radd(s, " size=%lld", (long long)st->st_size);
}

static void rstat(int s, const struct stat *st)
{
	radd(s, " %s mode=%04o nlink=%lu uid=%u gid=%u", ftype(st->st_mode),
	     (unsigned)(st->st_mode & 07777), (unsigned long)st->st_nlink,
	     (unsigned)st->st_uid, (unsigned)st->st_gid);
	rsize(s, st);
}

/* ---- the times of the objects a step names ---- */

struct tsnap {
	bool ok;
	ino_t ino;
	struct timespec m, c;
};

static struct {
	int n;
	bool fd[MAX_INV]; /* an fd slot rather than a path */
	int idx[MAX_INV]; /* name index (-1: the tree's root), or slot */
	struct tsnap before[2][MAX_INV];
} inv;

static bool times = true; /* SMUX_DIFF_TIMES=0: not compared */

static void inv_clear(void)
{
	inv.n = 0;
}

static void inv_add(bool fd, int idx)
{
	for (int i = 0; i < inv.n; i++)
		if (inv.fd[i] == fd && inv.idx[i] == idx)
			return;
	if (times && inv.n < MAX_INV) {
		inv.fd[inv.n] = fd;
		inv.idx[inv.n++] = idx;
	}
}

static int parent_of(int idx)
{
	const char *sl;

	if (idx < 0 || (size_t)idx >= NNAMES)
		return -1;
	sl = strrchr(names[idx], '/');
	if (!sl)
		return -1;
	for (size_t i = 0; i < NNAMES; i++)
		if (strlen(names[i]) == (size_t)(sl - names[idx]) &&
		    !strncmp(names[i], names[idx], (size_t)(sl - names[idx])))
			return (int)i;
	return -1;
}

/* a name and its parent directory */
static void inv_path(int idx)
{
	inv_add(false, idx);
	inv_add(false, parent_of(idx));
}

static void tsnap_take(int s, int i, struct tsnap *t)
{
	struct stat st;
	char b[4200];
	int r;

	if (inv.fd[i]) {
		int fd = slots[inv.idx[i]].fd[s];

		r = fd >= 0 ? fstat(fd, &st) : -1;
	} else {
		r = lstat(path(s, inv.idx[i], b, sizeof(b)), &st);
	}
	t->ok = r == 0;
	if (r == 0) {
		t->ino = st.st_ino;
		t->m = st.st_mtim;
		t->c = st.st_ctim;
	}
}

static bool ts_eq(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static void inv_before(int s)
{
	for (int i = 0; i < inv.n; i++)
		tsnap_take(s, i, &inv.before[s][i]);
}

/* " t[name:m+c+ ...]": which of mtime and ctime changed in the step */
static void inv_after(int s)
{
	if (!inv.n)
		return;
	radd(s, " t[");
	for (int i = 0; i < inv.n; i++) {
		struct tsnap a, *b = &inv.before[s][i];

		tsnap_take(s, i, &a);
		if (inv.fd[i])
			radd(s, "%sfd%d:", i ? " " : "", inv.idx[i]);
		else
			radd(s, "%s%s:", i ? " " : "",
			     inv.idx[i] < 0 ? "." : names[inv.idx[i]]);
		if (!a.ok || !b->ok || a.ino != b->ino) {
			radd(s, "-");
			continue;
		}
		radd(s, "m%cc%c", ts_eq(a.m, b->m) ? '=' : '+',
		     ts_eq(a.c, b->c) ? '=' : '+');
	}
	radd(s, "]");
}

/* Waits until the coarse clock (the one file times come from) is past
 * @last, so what the next step changes gets a time of its own. */
static void clock_past(const struct timespec *last)
{
	struct timespec now;

	for (;;) {
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
		if (now.tv_sec > last->tv_sec ||
		    (now.tv_sec == last->tv_sec && now.tv_nsec > last->tv_nsec))
			return;
		nanosleep(&(struct timespec){0, 250000}, NULL);
	}
}

/* ---- drawing ---- */

static int draw_name(void)
{
	return chance(50) ? (int)below(NSHALLOW) : (int)below(NNAMES);
}

static mode_t draw_mode(void)
{
	if (chance(15))
		return (mode_t)below(010000);
	return modes[below(NMODES)];
}

static int open_slot(void)
{
	int open[NSLOT] = {0}, n = 0;

	for (int i = 0; i < NSLOT; i++)
		if (slots[i].fd[0] >= 0 || slots[i].fd[1] >= 0)
			open[n++] = i;
	return n ? open[below((size_t)n)] : -1;
}

static int free_slot(void)
{
	for (int i = 0; i < NSLOT; i++)
		if (slots[i].fd[0] < 0 && slots[i].fd[1] < 0)
			return i;
	return -1;
}

static void draw_times(struct op *o)
{
	for (int i = 0; i < 2; i++) {
		size_t k = below(4);

		if (k == 0) {
			o->ts[i].tv_sec = 0;
			o->ts[i].tv_nsec = UTIME_NOW;
		} else if (k == 1) {
			o->ts[i].tv_sec = 0;
			o->ts[i].tv_nsec = UTIME_OMIT;
		} else {
			o->ts[i].tv_sec = 1000000000 + (time_t)below(400000000);
			o->ts[i].tv_nsec =
				chance(50) ? 0 : (long)below(1000000000);
		}
	}
}

static const char *tsdesc(const struct timespec *t, char *b, size_t cap)
{
	if (t->tv_nsec == UTIME_NOW)
		return "NOW";
	if (t->tv_nsec == UTIME_OMIT)
		return "OMIT";
	snprintf(b, cap, "%lld.%09ld", (long long)t->tv_sec, t->tv_nsec);
	return b;
}

static void open_flags_desc(int fl, char *b, size_t cap)
{
	static const struct {
		int f;
		const char *n;
	} t[] = {{O_CREAT, "CREAT"},	     {O_EXCL, "EXCL"},
		 {O_TRUNC, "TRUNC"},	     {O_APPEND, "APPEND"},
		 {O_DIRECTORY, "DIRECTORY"}, {O_NOFOLLOW, "NOFOLLOW"}};
	const char *acc = (fl & O_ACCMODE) == O_RDONLY	 ? "RDONLY"
			  : (fl & O_ACCMODE) == O_WRONLY ? "WRONLY"
							 : "RDWR";

	snprintf(b, cap, "%s", acc);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (fl & t[i].f)
			snprintf(b + strlen(b), cap - strlen(b), "|%s", t[i].n);
}

/* Fills @o with a new operation; false when it cannot run now (no open
 * descriptor for an fd operation, no free slot). */
/* Whether @name is a FIFO in the first tree (the local disk). */
static bool is_fifo(const char *name)
{
	char path[8192];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root[0], name);
	return lstat(path, &st) == 0 && S_ISFIFO(st.st_mode);
}

static bool draw(struct op *o)
{
	unsigned sum = 0, r;
	char fb[128], t0[32], t1[32];

	memset(o, 0, sizeof(*o));
	for (int k = 0; k < NOPS; k++)
		sum += skip[k] ? 0 : weights[k];
	r = (unsigned)below(sum);
	for (o->kind = 0; o->kind < NOPS; o->kind++) {
		unsigned w = skip[o->kind] ? 0 : weights[o->kind];

		if (r < w)
			break;
		r -= w;
	}
	o->p = draw_name();
	o->q = draw_name();
	o->slot = open_slot();
	switch (o->kind) {
	case OP_OPEN: {
		static const int acc[] = {O_RDONLY, O_WRONLY, O_RDWR};

		o->slot = free_slot();
		if (o->slot < 0)
			return false;
		o->flags = acc[below(3)];
		if (chance(55))
			o->flags |= O_CREAT;
		if (chance(20))
			o->flags |= O_EXCL;
		if (chance(20))
			o->flags |= O_TRUNC;
		if (chance(20))
			o->flags |= O_APPEND;
		if (chance(10))
			o->flags |= O_DIRECTORY;
		if (chance(15))
			o->flags |= O_NOFOLLOW;
		o->mode = draw_mode();
		open_flags_desc(o->flags, fb, sizeof(fb));
		snprintf(o->desc, sizeof(o->desc),
			 "open(%s, %s, 0%o) -> slot %d", names[o->p], fb,
			 (unsigned)o->mode, o->slot);
		return true;
	}
	case OP_MKDIR:
		o->mode = draw_mode();
		snprintf(o->desc, sizeof(o->desc), "mkdir(%s, 0%o)",
			 names[o->p], (unsigned)o->mode);
		return true;
	case OP_RMDIR:
	case OP_UNLINK:
	case OP_READLINK:
	case OP_MKFIFO:
	case OP_READDIR:
	case OP_CAT:
		if (o->kind == OP_MKFIFO) {
			o->mode = draw_mode();
			snprintf(o->desc, sizeof(o->desc), "mkfifo(%s, 0%o)",
				 names[o->p], (unsigned)o->mode);
		} else {
			snprintf(o->desc, sizeof(o->desc), "%s(%s)",
				 opnames[o->kind], names[o->p]);
		}
		return true;
	case OP_STAT:
		o->whence = (int)below(2);
		snprintf(o->desc, sizeof(o->desc), "%s(%s)",
			 o->whence ? "lstat" : "stat", names[o->p]);
		return true;
	case OP_TRUNCATE:
		o->off = chance(10) ? -1 : (off_t)below(MAX_OFF);
		snprintf(o->desc, sizeof(o->desc), "truncate(%s, %lld)",
			 names[o->p], (long long)o->off);
		return true;
	case OP_RENAME:
	case OP_EXCHANGE:
		o->flags = o->kind == OP_EXCHANGE ? RENAME_EXCHANGE
			   : chance(30)		  ? RENAME_NOREPLACE
						  : 0;
		if (chance(5))
			o->q = o->p;
		snprintf(o->desc, sizeof(o->desc), "renameat2(%s, %s, %s)",
			 names[o->p], names[o->q],
			 o->flags == RENAME_EXCHANGE	? "EXCHANGE"
			 : o->flags == RENAME_NOREPLACE ? "NOREPLACE"
							: "0");
		return true;
	case OP_LINK:
		if (skip_fifo_link && is_fifo(names[o->p]))
			return false;
		snprintf(o->desc, sizeof(o->desc), "link(%s, %s)", names[o->p],
			 names[o->q]);
		return true;
	case OP_SYMLINK:
		o->tgt = (int)below(NTARGETS);
		snprintf(o->desc, sizeof(o->desc), "symlink(\"%s\", %s)",
			 targets[o->tgt], names[o->p]);
		return true;
	case OP_CHMOD:
		o->mode = draw_mode();
		snprintf(o->desc, sizeof(o->desc), "chmod(%s, 0%o)",
			 names[o->p], (unsigned)o->mode);
		return true;
	case OP_CHOWN:
		o->whence = (int)below(2);
		o->uid = ids[below(4)];
		o->gid = (gid_t)ids[below(4)];
		snprintf(o->desc, sizeof(o->desc), "%s(%s, %d, %d)",
			 o->whence ? "lchown" : "chown", names[o->p],
			 (int)o->uid, (int)o->gid);
		return true;
	case OP_UTIMENS:
		draw_times(o);
		o->whence = chance(25) ? AT_SYMLINK_NOFOLLOW : 0;
		snprintf(o->desc, sizeof(o->desc), "utimensat(%s, {%s, %s}%s)",
			 names[o->p], tsdesc(&o->ts[0], t0, sizeof(t0)),
			 tsdesc(&o->ts[1], t1, sizeof(t1)),
			 o->whence ? ", NOFOLLOW" : "");
		return true;
	case OP_ACCESS: {
		static const int am[] = {F_OK, R_OK,	    W_OK,
					 X_OK, R_OK | W_OK, R_OK | X_OK};

		o->flags = am[below(6)];
		snprintf(o->desc, sizeof(o->desc), "access(%s, %d)",
			 names[o->p], o->flags);
		return true;
	}
	default:
		break;
	}
	/* the descriptor operations */
	if (o->slot < 0)
		return false;
	switch (o->kind) {
	case OP_WRITE:
	case OP_PWRITE:
		o->len = chance(5) ? 0 : 1 + below(MAX_IO);
		o->off = (off_t)below(MAX_OFF);
		o->dseed = rnd();
		if (o->kind == OP_WRITE)
			snprintf(o->desc, sizeof(o->desc),
				 "write(slot %d, %zu)", o->slot, o->len);
		else
			snprintf(o->desc, sizeof(o->desc),
				 "pwrite(slot %d, %zu, %lld)", o->slot, o->len,
				 (long long)o->off);
		break;
	case OP_READ:
	case OP_PREAD:
		o->len = 1 + below((size_t)MAX_IO * 2);
		o->off = (off_t)below(MAX_OFF + MAX_IO);
		if (o->kind == OP_READ)
			snprintf(o->desc, sizeof(o->desc), "read(slot %d, %zu)",
				 o->slot, o->len);
		else
			snprintf(o->desc, sizeof(o->desc),
				 "pread(slot %d, %zu, %lld)", o->slot, o->len,
				 (long long)o->off);
		break;
	case OP_LSEEK: {
		static const int wh[] = {SEEK_SET, SEEK_CUR, SEEK_END,
					 SEEK_DATA, SEEK_HOLE};
		static const char *const wn[] = {"SET", "CUR", "END", "DATA",
						 "HOLE"};
		size_t k = below(5);

		o->whence = wh[k];
		o->off = (off_t)below(MAX_OFF + MAX_IO);
		if (k == 1 || k == 2)
			o->off -= (off_t)below(MAX_IO);
		snprintf(o->desc, sizeof(o->desc), "lseek(slot %d, %lld, %s)",
			 o->slot, (long long)o->off, wn[k]);
		break;
	}
	case OP_FTRUNCATE:
		o->off = (off_t)below(MAX_OFF);
		snprintf(o->desc, sizeof(o->desc), "ftruncate(slot %d, %lld)",
			 o->slot, (long long)o->off);
		break;
	case OP_FSYNC:
		o->flags = (int)below(2);
		snprintf(o->desc, sizeof(o->desc), "%s(slot %d)",
			 o->flags ? "fdatasync" : "fsync", o->slot);
		break;
	case OP_FCHMOD:
		o->mode = draw_mode();
		snprintf(o->desc, sizeof(o->desc), "fchmod(slot %d, 0%o)",
			 o->slot, (unsigned)o->mode);
		break;
	case OP_FCHOWN:
		o->uid = ids[below(4)];
		o->gid = (gid_t)ids[below(4)];
		snprintf(o->desc, sizeof(o->desc), "fchown(slot %d, %d, %d)",
			 o->slot, (int)o->uid, (int)o->gid);
		break;
	case OP_FUTIMENS:
		draw_times(o);
		snprintf(o->desc, sizeof(o->desc),
			 "futimens(slot %d, {%s, %s})", o->slot,
			 tsdesc(&o->ts[0], t0, sizeof(t0)),
			 tsdesc(&o->ts[1], t1, sizeof(t1)));
		break;
	case OP_FALLOCATE: {
		static const int fm[] = {
			0, FALLOC_FL_KEEP_SIZE,
			FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			FALLOC_FL_ZERO_RANGE,
			FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE};
		static const char *const fmn[] = {
			"0", "KEEP_SIZE", "PUNCH_HOLE|KEEP_SIZE", "ZERO_RANGE",
			"ZERO_RANGE|KEEP_SIZE"};
		size_t k = below(5);

		o->flags = fm[k];
		o->off = (off_t)below(MAX_OFF);
		o->len = 1 + below((size_t)MAX_IO * 2);
		snprintf(o->desc, sizeof(o->desc),
			 "fallocate(slot %d, %s, %lld, %zu)", o->slot, fmn[k],
			 (long long)o->off, o->len);
		break;
	}
	default:
		snprintf(o->desc, sizeof(o->desc), "%s(slot %d)",
			 opnames[o->kind], o->slot);
		break;
	}
	snprintf(o->desc + strlen(o->desc), sizeof(o->desc) - strlen(o->desc),
		 " [%s]", slots[o->slot].desc);
	return true;
}

/* ---- running ---- */

static unsigned char wbuf[MAX_IO], rbuf[MAX_IO * 2], cbuf[MAX_OFF * 4];

static void fill(uint64_t seed, size_t len)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		wbuf[i] = (unsigned char)x;
	}
}

static void rread(int s, ssize_t n, int err)
{
	rc(s, n, err);
	if (n > 0)
		radd(s, " h=%016llx", (unsigned long long)fnv(rbuf, (size_t)n));
}

/* every name in a directory, sorted, without . and .. */
static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void rlist(int s, DIR *d)
{
	char *v[256] = {0};
	size_t n = 0;
	struct dirent *e;

	errno = 0;
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n < 256)
			v[n++] = strdup(e->d_name);
	}
	if (errno)
		radd(s, " readdir:%s", strerrorname_np(errno));
	qsort(v, n, sizeof(v[0]), cmpstr);
	radd(s, " {");
	for (size_t i = 0; i < n; i++) {
		radd(s, "%s%s", i ? " " : "", v[i]);
		free(v[i]);
	}
	radd(s, "}");
}

/* Reads a whole file through a new descriptor. */
static void rcat(int s, const char *p)
{
	int fd = open(p, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	size_t got = 0;
	ssize_t n = 0;

	if (fd < 0) {
		radd(s, " cat:");
		rc(s, -1, errno);
		return;
	}
	while (got < sizeof(cbuf) &&
	       (n = read(fd, cbuf + got, sizeof(cbuf) - got)) > 0)
		got += (size_t)n;
	if (n < 0)
		radd(s, " cat:read:%s", strerrorname_np(errno));
	radd(s, " cat:%zu:%016llx", got, (unsigned long long)fnv(cbuf, got));
	close(fd);
}

static void run(int s, struct op *o)
{
	char p[4200], q[4200];
	int fd = o->slot >= 0 ? slots[o->slot].fd[s] : -1;
	struct stat st;
	long v;
	int e;

	path(s, o->p, p, sizeof(p));
	path(s, o->q, q, sizeof(q));
	/*
	 * An unprivileged caller's new file, directory or FIFO never gets
	 * setuid or setgid on the mount, whatever the mode asked for
	 * (docs/configuration.md, "setuid and setgid are never granted by
	 * the daemon"), where ext4 keeps setgid for a member of the group:
	 * the user phase does not ask for them. (A set-id bit inherited
	 * from a setgid directory is still compared.)
	 */
	if (geteuid() != 0 &&
	    (o->kind == OP_OPEN || o->kind == OP_MKDIR || o->kind == OP_MKFIFO))
		o->mode &= ~(mode_t)(S_ISUID | S_ISGID);
	errno = 0;
	switch (o->kind) {
	case OP_OPEN:
		v = open(p, o->flags | O_NONBLOCK | O_CLOEXEC, o->mode);
		e = errno;
		rc(s, v >= 0 ? 0 : -1, e);
		slots[o->slot].fd[s] = (int)v;
		if (v >= 0 && fstat((int)v, &st) == 0)
			rstat(s, &st);
		break;
	case OP_CLOSE:
		v = fd >= 0 ? close(fd) : 0;
		rc(s, v, errno);
		slots[o->slot].fd[s] = -1;
		break;
	case OP_WRITE:
	case OP_PWRITE:
		fill(o->dseed, o->len);
		v = o->kind == OP_WRITE ? write(fd, wbuf, o->len)
					: pwrite(fd, wbuf, o->len, o->off);
		rc(s, v, errno);
		if (fstat(fd, &st) == 0) {
			rsize(s, &st);
			radd(s, " mode=%04o", (unsigned)(st.st_mode & 07777));
		}
		/* (a directory's position is a cookie: not compared) */
		if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode))
			radd(s, " pos=%ld", (long)lseek(fd, 0, SEEK_CUR));
		break;
	case OP_READ:
	case OP_PREAD:
		v = o->kind == OP_READ ? read(fd, rbuf, o->len)
				       : pread(fd, rbuf, o->len, o->off);
		e = errno;
		/* read(2) of a directory is EISDIR, unless its position (a
		 * cookie: ext4's end is LLONG_MAX) plus the count overflows,
		 * which is EINVAL first: the same answer here */
		if (v < 0 && e == EINVAL && fstat(fd, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			e = EISDIR;
		rread(s, v, e);
		break;
	case OP_LSEEK:
		/* a directory's offsets are the filesystem's own cookies
		 * (telldir(3)): not compared */
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
			radd(s, "dir");
			break;
		}
		v = lseek(fd, o->off, o->whence);
		e = errno;
		if (o->whence != SEEK_DATA && o->whence != SEEK_HOLE) {
			rc(s, v, e);
			break;
		}
		/*
		 * SEEK_DATA and SEEK_HOLE: smuxfs has no lseek of its own
		 * ("a file is data from 0 to its size", src/fs/fnode.c), the
		 * simplest form lseek(2) allows: so not ext4's offsets, but
		 * what every filesystem must answer: ENXIO at or past the
		 * end; before it, data at or after @off (or ENXIO: a hole up
		 * to the end), a hole after @off and at most at the end.
		 * The position is put back to @off on both trees so that
		 * later reads compare.
		 */
		if (fstat(fd, &st) != 0)
			st.st_size = 0;
		if (o->off >= st.st_size || (v < 0 && e != ENXIO) ||
		    (v < 0 && o->whence == SEEK_HOLE))
			rc(s, v, e);
		else if (o->whence == SEEK_DATA)
			radd(s, "%s",
			     v < 0 || (v >= o->off && v < st.st_size)
				     ? "data or ENXIO"
				     : "bad data");
		else
			radd(s, "%s",
			     v >= o->off && v <= st.st_size ? "hole"
							    : "bad hole");
		if (lseek(fd, o->off, SEEK_SET) < 0)
			radd(s, " seek back:%s", strerrorname_np(errno));
		break;
	case OP_FTRUNCATE:
		v = ftruncate(fd, o->off);
		rc(s, v, errno);
		if (fstat(fd, &st) == 0) {
			rsize(s, &st);
			radd(s, " mode=%04o", (unsigned)(st.st_mode & 07777));
		}
		break;
	case OP_TRUNCATE:
		v = truncate(p, o->off);
		rc(s, v, errno);
		if (stat(p, &st) == 0)
			rstat(s, &st);
		break;
	case OP_FSYNC:
		v = o->flags ? fdatasync(fd) : fsync(fd);
		rc(s, v, errno);
		break;
	case OP_FSTAT:
		v = fstat(fd, &st);
		rc(s, v, errno);
		if (!v)
			rstat(s, &st);
		break;
	case OP_STAT:
		v = o->whence ? lstat(p, &st) : stat(p, &st);
		rc(s, v, errno);
		if (!v)
			rstat(s, &st);
		break;
	case OP_MKDIR:
		v = mkdir(p, o->mode);
		rc(s, v, errno);
		if (!v && lstat(p, &st) == 0)
			rstat(s, &st);
		break;
	case OP_RMDIR:
		v = rmdir(p);
		rc(s, v, errno);
		break;
	case OP_UNLINK:
		v = unlink(p);
		rc(s, v, errno);
		break;
	case OP_RENAME:
	case OP_EXCHANGE:
		v = renameat2(AT_FDCWD, p, AT_FDCWD, q, (unsigned)o->flags);
		rc(s, v, errno);
		if (lstat(q, &st) == 0)
			rstat(s, &st);
		break;
	case OP_LINK:
		v = link(p, q);
		rc(s, v, errno);
		if (lstat(q, &st) == 0)
			rstat(s, &st);
		break;
	case OP_SYMLINK:
		v = symlink(targets[o->tgt], p);
		rc(s, v, errno);
		if (!v && lstat(p, &st) == 0)
			rstat(s, &st);
		break;
	case OP_READLINK: {
		char b[256];

		v = readlink(p, b, sizeof(b) - 1);
		rc(s, v, errno);
		if (v >= 0)
			radd(s, " \"%.*s\"", (int)v, b);
		break;
	}
	case OP_CHMOD:
		v = chmod(p, o->mode);
		rc(s, v, errno);
		if (lstat(p, &st) == 0)
			rstat(s, &st);
		break;
	case OP_FCHMOD:
		v = fchmod(fd, o->mode);
		rc(s, v, errno);
		if (fstat(fd, &st) == 0)
			rstat(s, &st);
		break;
	case OP_CHOWN:
		v = o->whence ? lchown(p, o->uid, o->gid)
			      : chown(p, o->uid, o->gid);
		rc(s, v, errno);
		if (lstat(p, &st) == 0)
			rstat(s, &st);
		break;
	case OP_FCHOWN:
		v = fchown(fd, o->uid, o->gid);
		rc(s, v, errno);
		if (fstat(fd, &st) == 0)
			rstat(s, &st);
		break;
	case OP_UTIMENS:
	case OP_FUTIMENS: {
		int nofollow = o->kind == OP_UTIMENS && o->whence;

		v = o->kind == OP_UTIMENS
			    ? utimensat(AT_FDCWD, p, o->ts, o->whence)
			    : futimens(fd, o->ts);
		rc(s, v, errno);
		if (v == 0 && (o->kind == OP_FUTIMENS ? fstat(fd, &st)
			       : nofollow	      ? lstat(p, &st)
						      : stat(p, &st)) == 0) {
			/* the times set explicitly read back exactly */
			if (o->ts[0].tv_nsec != UTIME_NOW &&
			    o->ts[0].tv_nsec != UTIME_OMIT)
				radd(s, " atime=%lld.%09ld",
				     (long long)st.st_atim.tv_sec,
				     st.st_atim.tv_nsec);
			if (o->ts[1].tv_nsec != UTIME_NOW &&
			    o->ts[1].tv_nsec != UTIME_OMIT)
				radd(s, " mtime=%lld.%09ld",
				     (long long)st.st_mtim.tv_sec,
				     st.st_mtim.tv_nsec);
		}
		break;
	}
	case OP_ACCESS:
		v = access(p, o->flags);
		rc(s, v, errno);
		break;
	case OP_MKFIFO:
		v = mkfifo(p, o->mode);
		rc(s, v, errno);
		if (!v && lstat(p, &st) == 0)
			rstat(s, &st);
		break;
	case OP_FALLOCATE:
		v = fallocate(fd, o->flags, o->off, (off_t)o->len);
		rc(s, v, errno);
		if (fstat(fd, &st) == 0)
			rsize(s, &st);
		break;
	case OP_READDIR: {
		DIR *d = opendir(p);

		rc(s, d ? 0 : -1, errno);
		if (d) {
			rlist(s, d);
			closedir(d);
		}
		break;
	}
	case OP_FREADDIR: {
		int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;

		rc(s, d ? 0 : -1, errno);
		if (d) {
			rewinddir(d);
			rlist(s, d);
			closedir(d);
		} else if (dfd >= 0) {
			close(dfd);
		}
		break;
	}
	case OP_CAT:
		v = lstat(p, &st);
		rc(s, v, errno);
		if (!v && S_ISREG(st.st_mode))
			rcat(s, p);
		break;
	}
}

/* The objects whose times a step checks. */
static void involve(const struct op *o)
{
	inv_clear();
	switch (o->kind) {
	case OP_STAT:
	case OP_READLINK:
	case OP_ACCESS:
	case OP_READDIR:
	case OP_CAT:
	case OP_FSTAT:
	case OP_LSEEK:
		return; /* readers: atime only, not compared */
	case OP_RENAME:
	case OP_EXCHANGE:
	case OP_LINK:
		inv_path(o->p);
		inv_path(o->q);
		return;
	case OP_OPEN:
	case OP_TRUNCATE:
	case OP_MKDIR:
	case OP_RMDIR:
	case OP_UNLINK:
	case OP_SYMLINK:
	case OP_CHMOD:
	case OP_CHOWN:
	case OP_UTIMENS:
	case OP_MKFIFO:
		inv_path(o->p);
		return;
	default:
		if (o->slot >= 0)
			inv_add(true, o->slot);
	}
}

/* ---- the whole namespace ---- */

static void state(int s)
{
	ino_t inos[NNAMES];
	char p[4200];

	for (size_t i = 0; i < NNAMES; i++) {
		struct stat st;

		inos[i] = 0;
		path(s, (int)i, p, sizeof(p));
		if (lstat(p, &st) != 0) {
			if (errno != ENOENT)
				radd(s, "%s:%s ", names[i],
				     strerrorname_np(errno));
			continue;
		}
		radd(s, "%s:", names[i]);
		rstat(s, &st);
		if (S_ISREG(st.st_mode)) {
			rcat(s, p);
			inos[i] = st.st_ino;
		} else if (S_ISLNK(st.st_mode)) {
			char b[256];
			ssize_t n = readlink(p, b, sizeof(b) - 1);

			radd(s, " -> \"%.*s\"", (int)(n > 0 ? n : 0), b);
			inos[i] = st.st_ino;
		} else if (S_ISDIR(st.st_mode)) {
			DIR *d = opendir(p);

			if (d) {
				rlist(s, d);
				closedir(d);
			} else {
				radd(s, " opendir:%s", strerrorname_np(errno));
			}
		} else {
			inos[i] = st.st_ino;
		}
		/* which earlier name is the same file (hard links) */
		for (size_t j = 0; j < i; j++)
			if (inos[i] && inos[j] == inos[i]) {
				radd(s, " =%s", names[j]);
				break;
			}
		radd(s, "\n");
	}
	{
		DIR *d = opendir(root[s]);

		radd(s, ".:");
		if (d) {
			rlist(s, d);
			closedir(d);
		}
		radd(s, "\n");
	}
}

static void res_clear(void)
{
	rlen[0] = rlen[1] = 0;
	res[0][0] = res[1][0] = 0;
}

static void print_trace(void)
{
	unsigned n = trace_n < TRACE_KEEP ? trace_n : TRACE_KEEP;

	fprintf(stderr, "posix_diff: the last %u steps before it:\n", n);
	for (unsigned i = trace_n - n; i < trace_n; i++)
		fprintf(stderr, "  %s\n", trace_ring[i % TRACE_KEEP]);
}

static unsigned long seed_arg;

static void compare(const char *what)
{
	if (!strcmp(res[0], res[1]))
		return;
	fprintf(stderr,
		"posix_diff: DIVERGENCE seed %lu step %lu (%s phase): %s\n"
		"  A (%s):\n    %s\n  B (%s):\n    %s\n",
		seed_arg, step, phase, what, root[0], res[0], root[1], res[1]);
	if (trace)
		print_trace();
	exit(1);
}

static void check_state(void)
{
	res_clear();
	state(0);
	state(1);
	compare("the whole namespace");
}

static void one_step(void)
{
	struct op o;
	static struct timespec last;

	while (!draw(&o))
		;
	step++;
	counts[o.kind]++;
	involve(&o);
	clock_past(&last);
	res_clear();
	for (int s = 0; s < 2; s++) {
		inv_before(s);
		run(s, &o);
		inv_after(s);
	}
	clock_gettime(CLOCK_REALTIME_COARSE, &last);
	if (o.kind == OP_OPEN &&
	    (slots[o.slot].fd[0] >= 0 || slots[o.slot].fd[1] >= 0))
		snprintf(slots[o.slot].desc, sizeof(slots[o.slot].desc),
			 "%s of %.60s", phase, o.desc + 5);
	snprintf(trace_ring[trace_n++ % TRACE_KEEP], sizeof(trace_ring[0]),
		 "%lu: %s => %s", step, o.desc, res[0]);
	if (trace > 1)
		fprintf(stderr, "%lu: %s\n  A: %s\n  B: %s\n", step, o.desc,
			res[0], res[1]);
	compare(o.desc);
	if (step % 10 == 0)
		check_state();
}

static void close_all(void)
{
	for (int i = 0; i < NSLOT; i++)
		for (int s = 0; s < 2; s++) {
			if (slots[i].fd[s] >= 0)
				close(slots[i].fd[s]);
			slots[i].fd[s] = -1;
		}
}

static void run_steps(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		one_step();
	close_all();
	check_state();
	total += n;
}

static void print_counts(void)
{
	fprintf(stderr,
		"posix_diff: seed %lu: %lu steps (%s phase) agreed:", seed_arg,
		total, phase);
	for (int k = 0; k < NOPS; k++)
		if (counts[k])
			fprintf(stderr, " %s %lu", opnames[k], counts[k]);
	fputc('\n', stderr);
}

static void parse_skip(const char *v)
{
	while (v && *v) {
		size_t n = strcspn(v, ",");
		int k;

		if (n == 8 && !strncmp(v, "fifolink", n)) {
			skip_fifo_link = true;
			v += n + (v[n] == ',');
			continue;
		}
		for (k = 0; k < NOPS; k++)
			if (strlen(opnames[k]) == n &&
			    !strncmp(opnames[k], v, n))
				break;
		if (k == NOPS)
			setup_die("SMUX_DIFF_SKIP: no operation '%.*s'", (int)n,
				  v);
		skip[k] = true;
		v += n + (v[n] == ',');
	}
	if (skip[OP_OPEN])
		setup_die("SMUX_DIFF_SKIP: open is needed");
}

int main(int argc, char **argv)
{
	static const mode_t umasks[] = {0, 022, 027, 002};
	static const mode_t rootmodes[] = {0777, 01777, 0755, 0775};
	const char *env;
	unsigned long steps;
	mode_t rm;
	uid_t user;

	if (argc != 5)
		setup_die("usage: posix_diff DIR_A DIR_B SEED STEPS");
	/* a write to a FIFO nobody reads is EPIPE in both trees, compared
	 * like any result, not the end of the run */
	signal(SIGPIPE, SIG_IGN);
	seed_arg = strtoul(argv[3], NULL, 0);
	steps = strtoul(argv[4], NULL, 0);
	rng_state = seed_arg * 0x9E3779B97F4A7C15ULL + 1;
	for (int i = 0; i < 16; i++)
		rnd();
	env = getenv("SMUX_DIFF_TRACE");
	trace = env ? atoi(env) : 0;
	parse_skip(getenv("SMUX_DIFF_SKIP"));
	env = getenv("SMUX_DIFF_TIMES");
	times = !(env && !strcmp(env, "0"));
	for (int i = 0; i < NSLOT; i++)
		slots[i].fd[0] = slots[i].fd[1] = -1;

	/* the seed picks the umask, the mode of w/ and the second user */
	umask(umasks[below(4)]);
	rm = rootmodes[below(4)];
	user = chance(50) ? 1000 : 65534;
	for (int s = 0; s < 2; s++) {
		snprintf(root[s], sizeof(root[s]), "%s/w", argv[1 + s]);
		if (mkdir(root[s], 0700) != 0)
			setup_die("mkdir %s: %s", root[s], strerror(errno));
		if (chmod(root[s], rm) != 0)
			setup_die("chmod %s: %s", root[s], strerror(errno));
	}
	check_state();
	run_steps(steps);
	print_counts();

	env = getenv("SMUX_DIFF_USER");
	if (geteuid() == 0 && !(env && !strcmp(env, "0"))) {
		pid_t pid;
		int status;

		fflush(NULL);
		pid = fork();
		if (pid < 0)
			setup_die("fork: %s", strerror(errno));
		if (pid == 0) {
			phase = user == 1000 ? "uid 1000" : "uid 65534";
			if (setgroups(0, NULL) != 0 ||
			    setresgid(user, user, user) != 0 ||
			    setresuid(user, user, user) != 0)
				setup_die("setresuid %u: %s", (unsigned)user,
					  strerror(errno));
			run_steps(steps / 4);
			print_counts();
			exit(0);
		}
		if (waitpid(pid, &status, 0) != pid)
			setup_die("waitpid: %s", strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
		check_state();
	}
	return 0;
}
