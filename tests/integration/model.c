/* SPDX-License-Identifier: MIT */
/*
 * model.c - a model-based test of one file on a smuxfs mount.
 *
 *   model DIR SEED STEPS OUT
 *
 * Applies a seeded random sequence of operations to a file DIR/f0 (renamed
 * back and forth to DIR/f1) and to an in-memory model of its content:
 * pwrite at random offsets (past the end too, leaving holes), ftruncate
 * (grow and shrink), pread (compared with the model, short reads at the end
 * included), fstat and stat sizes, fsync, close + reopen, rename while open
 * for writing and while closed, a whole-file read through a second
 * descriptor, and a clean read-only descriptor that reads across a rename.
 * Every read is compared; at the end the file is reopened and compared in
 * full. The final model is written to OUT and the final name ("f0" or "f1")
 * printed, so the caller can compare the backing replicas too.
 *
 * SMUX_MODEL_EXTRA=1 (set and not 0) in the environment adds, in about one step in six,
 * operations other exercisers use: truncate(2) by path while the file is
 * open, a reopen with O_TRUNC, an O_APPEND write through a second
 * descriptor, a write through a shared writable mmap and a read through a
 * read-only one, and a burst of write + close + rename + stat cycles (an
 * upload at once renamed: a server-side copy of what was just put).
 * Without it the sequence of a seed is the same as before.
 *
 * SMUX_MODEL_TRACE=1 in the environment prints every step to stderr.
 * Exit 0 when every step matched; 1 with the step, the operation and the
 * first differing offset otherwise. Plain C11 + POSIX, no dependencies.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SIZE (1u << 20) /* the model file never grows past 1 MiB */
#define MAX_IO	 (256u << 10)

static uint64_t rng_state;
static unsigned long step;
static const char *op = "start";
static unsigned char *model; /* MAX_SIZE bytes; [size, MAX_SIZE) is zero */
static size_t size;
static unsigned char *buf;
static char dir[4096];
static int cur;	  /* 0: f0, 1: f1 */
static int trace; /* SMUX_MODEL_TRACE set: print every step */
static int extra; /* SMUX_MODEL_EXTRA set: also the extra operations */

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

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "model: step %lu (%s): ", step, op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static const char *name(int which)
{
	static char p[2][4200];

	snprintf(p[which], sizeof(p[which]), "%s/f%d", dir, which);
	return p[which];
}

static int xopen(int flags)
{
	int fd = open(name(cur), flags, 0644);

	if (fd < 0)
		die("open %s: %s", name(cur), strerror(errno));
	return fd;
}

static void xclose(int fd)
{
	if (close(fd) != 0)
		die("close: %s", strerror(errno));
}

/* Reads [off, off + len) from @fd and compares it with the model. */
static void check_range(int fd, size_t off, size_t len)
{
	size_t want = off >= size ? 0 : (len < size - off ? len : size - off);
	size_t got = 0;

	if (trace)
		fprintf(stderr, "  %lu %s: read off %zu len %zu (size %zu)\n",
			step, op, off, len, size);
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));

		if (n < 0)
			die("pread(%zu, %zu): %s", off + got, len - got,
			    strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got != want)
		die("pread(%zu, %zu) returned %zu bytes, model has %zu (size "
		    "%zu)",
		    off, len, got, want, size);
	for (size_t i = 0; i < got; i++)
		if (buf[i] != model[off + i])
			die("byte %zu is 0x%02x, model 0x%02x (size %zu)",
			    off + i, buf[i], model[off + i], size);
}

static void check_size_fd(int fd)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		die("fstat: %s", strerror(errno));
	if ((size_t)st.st_size != size)
		die("fstat size %lld, model %zu", (long long)st.st_size, size);
}

static void check_size_path(void)
{
	struct stat st;

	if (stat(name(cur), &st) != 0)
		die("stat %s: %s", name(cur), strerror(errno));
	if ((size_t)st.st_size != size)
		die("stat size %lld, model %zu", (long long)st.st_size, size);
	if (stat(name(!cur), &st) == 0 || errno != ENOENT)
		die("%s exists after rename", name(!cur));
}

static void do_write(int fd)
{
	size_t len = rnd() % 4 ? 1 + below(4096) : 1 + below(MAX_IO);
	size_t room = MAX_SIZE - len;
	size_t hi = size + 65536 < room ? size + 65536 : room;
	size_t off = below(hi + 1), done = 0;

	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)rnd();
	while (done < len) {
		ssize_t n =
			pwrite(fd, buf + done, len - done, (off_t)(off + done));

		if (n <= 0)
			die("pwrite(%zu, %zu): %s", off + done, len - done,
			    n < 0 ? strerror(errno) : "wrote 0");
		done += (size_t)n;
	}
	if (trace)
		fprintf(stderr, "  %lu write off %zu len %zu\n", step, off,
			len);
	memcpy(model + off, buf, len);
	if (off + len > size)
		size = off + len;
}

static void do_truncate(int fd)
{
	size_t to;

	if (rnd() % 2 && size > 0)
		to = below(size); /* shrink */
	else
		to = size + below(256u << 10); /* grow (or keep) */
	if (to > MAX_SIZE)
		to = MAX_SIZE;
	if (trace)
		fprintf(stderr, "  %lu truncate %zu -> %zu\n", step, size, to);
	if (ftruncate(fd, (off_t)to) != 0)
		die("ftruncate(%zu): %s", to, strerror(errno));
	if (to < size)
		memset(model + to, 0, size - to);
	size = to;
}

static void do_rename(void)
{
	if (trace)
		fprintf(stderr, "  %lu rename f%d -> f%d\n", step, cur, !cur);
	if (rename(name(cur), name(!cur)) != 0)
		die("rename %s -> %s: %s", name(cur), name(!cur),
		    strerror(errno));
	cur = !cur;
}

/* truncate(2) by path while @fd stays open */
static void do_path_truncate(void)
{
	size_t to = below(size + 65536);

	if (to > MAX_SIZE)
		to = MAX_SIZE;
	if (trace)
		fprintf(stderr, "  %lu path truncate %zu -> %zu\n", step, size,
			to);
	if (truncate(name(cur), (off_t)to) != 0)
		die("truncate(%zu): %s", to, strerror(errno));
	if (to < size)
		memset(model + to, 0, size - to);
	size = to;
}

/* a write through a second descriptor opened with O_APPEND */
static void do_append(void)
{
	size_t len = 1 + below(8192), done = 0;
	int fd2;

	if (size + len > MAX_SIZE)
		return;
	fd2 = xopen(O_WRONLY | O_APPEND);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)rnd();
	if (trace)
		fprintf(stderr, "  %lu append %zu at %zu\n", step, len, size);
	while (done < len) {
		ssize_t n = write(fd2, buf + done, len - done);

		if (n <= 0)
			die("append write(%zu): %s", len - done,
			    n < 0 ? strerror(errno) : "wrote 0");
		done += (size_t)n;
	}
	xclose(fd2);
	memcpy(model + size, buf, len);
	size += len;
}

/* a write through a shared writable mapping of [0, size) of @fd, then
 * msync; or a read through a read-only mapping */
static void do_mmap(int fd, int wr)
{
	size_t off, len;
	unsigned char *p;

	if (size == 0)
		return;
	off = below(size);
	len = 1 + below(size - off < 65536 ? size - off : 65536);
	p = mmap(NULL, size, wr ? PROT_READ | PROT_WRITE : PROT_READ,
		 MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap(%zu, %s): %s", size, wr ? "rw" : "r",
		    strerror(errno));
	if (trace)
		fprintf(stderr, "  %lu mmap %s off %zu len %zu (size %zu)\n",
			step, wr ? "write" : "read", off, len, size);
	if (wr) {
		for (size_t i = 0; i < len; i++)
			model[off + i] = p[off + i] = (unsigned char)rnd();
		if (msync(p, size, MS_SYNC) != 0)
			die("msync: %s", strerror(errno));
	} else {
		for (size_t i = 0; i < len; i++)
			if (p[off + i] != model[off + i])
				die("mapped byte %zu is 0x%02x, model 0x%02x "
				    "(size %zu)",
				    off + i, p[off + i], model[off + i], size);
	}
	munmap(p, size);
}

/* a burst of short write sessions, each checked by path at once: a
 * write at 0 (within the size), close, rename, stat; reopen */
static int do_burst(int fd)
{
	unsigned n = 10 + (unsigned)below(40);

	for (unsigned i = 0; i < n; i++) {
		size_t len = 1 + below(size ? size : 65536);

		if (trace)
			fprintf(stderr, "  %lu burst %u/%u\n", step, i + 1, n);
		if (len > MAX_SIZE)
			len = MAX_SIZE;
		for (size_t k = 0; k < len; k++)
			buf[k] = (unsigned char)rnd();
		if (pwrite(fd, buf, len, 0) != (ssize_t)len)
			die("pwrite(0, %zu): %s", len, strerror(errno));
		memcpy(model, buf, len);
		if (len > size)
			size = len;
		xclose(fd);
		do_rename();
		check_size_path();
		fd = xopen(O_RDWR);
	}
	return fd;
}

/* one of the SMUX_MODEL_EXTRA operations; returns the (new) descriptor */
static int do_extra(int fd)
{
	unsigned r = (unsigned)below(6);

	if (r == 0) {
		op = "path truncate";
		do_path_truncate();
		check_size_fd(fd);
	} else if (r == 1) {
		op = "reopen O_TRUNC";
		xclose(fd);
		fd = xopen(O_RDWR | O_TRUNC);
		memset(model, 0, size);
		size = 0;
		check_size_path();
	} else if (r == 2) {
		op = "append";
		do_append();
		check_size_fd(fd);
	} else if (r == 3) {
		op = "mmap write";
		do_mmap(fd, 1);
		check_range(fd, 0, size + 1);
	} else if (r == 4) {
		op = "mmap read";
		do_mmap(fd, 0);
	} else {
		op = "write+close+rename burst";
		fd = do_burst(fd);
	}
	return fd;
}

int main(int argc, char **argv)
{
	unsigned long steps;
	const char *env;
	int fd;
	FILE *out;

	if (argc != 5) {
		fprintf(stderr, "usage: model DIR SEED STEPS OUT\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	rng_state = strtoull(argv[2], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
	steps = strtoul(argv[3], NULL, 10);
	trace = getenv("SMUX_MODEL_TRACE") != NULL;
	env = getenv("SMUX_MODEL_EXTRA");
	extra = env && strcmp(env, "0") != 0;
	model = calloc(1, MAX_SIZE);
	buf = malloc(MAX_SIZE + 4096);
	if (!model || !buf)
		return 2;

	unlink(name(0));
	unlink(name(1));
	fd = xopen(O_RDWR | O_CREAT | O_EXCL);
	for (step = 1; step <= steps; step++) {
		unsigned r;

		if (extra && below(6) == 0) {
			fd = do_extra(fd);
			continue;
		}
		r = (unsigned)below(100);

		if (trace && r >= 66 && r < 96)
			fprintf(stderr, "  %lu %s\n", step,
				r < 71	 ? "fstat"
				: r < 75 ? "fsync"
				: r < 80 ? "close+reopen"
				: r < 83 ? "rename while open"
				: r < 86 ? "close+rename+reopen"
				: r < 90 ? "fsync+second reader"
				: r < 93 ? "second reader"
					 : "reader across rename");

		if (r < 34) {
			op = "write";
			do_write(fd);
		} else if (r < 58) {
			size_t off = below(size + 100);

			op = "read";
			check_range(fd, off, 1 + below(MAX_IO));
		} else if (r < 66) {
			op = "truncate";
			do_truncate(fd);
		} else if (r < 71) {
			op = "fstat";
			check_size_fd(fd);
		} else if (r < 75) {
			op = "fsync";
			if (fsync(fd) != 0)
				die("fsync: %s", strerror(errno));
		} else if (r < 80) {
			op = "close+reopen";
			xclose(fd);
			fd = xopen(O_RDWR);
			check_size_path();
			check_size_fd(fd);
		} else if (r < 83) {
			op = "rename while open";
			do_rename();
			check_size_path();
		} else if (r < 86) {
			op = "close+rename+reopen";
			xclose(fd);
			do_rename();
			check_size_path();
			fd = xopen(O_RDWR);
		} else if (r < 90) {
			/* after fsync the data is committed: a second
			 * descriptor opened now must see all of it */
			int fd2;

			op = "fsync+second reader";
			if (fsync(fd) != 0)
				die("fsync: %s", strerror(errno));
			fd2 = xopen(O_RDONLY);
			check_range(fd2, 0, size + 1);
			xclose(fd2);
		} else if (r < 93) {
			/* a second descriptor of the same file while the
			 * first has unflushed writes (local-fs semantics) */
			int fd2;

			op = "second reader";
			fd2 = xopen(O_RDONLY);
			check_range(fd2, 0, size + 1);
			xclose(fd2);
		} else if (r < 96) {
			/* a clean read-only descriptor (no writer open) keeps
			 * reading the file across a rename */
			int fd2;

			op = "reader across rename";
			xclose(fd);
			fd2 = xopen(O_RDONLY);
			do_rename();
			check_range(fd2, below(size + 1), 1 + below(MAX_IO));
			check_range(fd2, 0, size + 1);
			xclose(fd2);
			fd = xopen(O_RDWR);
		} else {
			op = "small write";
			do_write(fd);
			check_size_fd(fd);
		}
	}
	op = "final";
	xclose(fd);
	fd = xopen(O_RDONLY);
	check_size_fd(fd);
	check_range(fd, 0, MAX_SIZE);
	xclose(fd);
	check_size_path();

	out = fopen(argv[4], "wb");
	if (!out || fwrite(model, 1, size, out) != size || fclose(out) != 0) {
		fprintf(stderr, "model: cannot write %s\n", argv[4]);
		return 2;
	}
	printf("f%d\n", cur);
	fprintf(stderr, "model: %lu steps matched, final size %zu\n", steps,
		size);
	free(model);
	free(buf);
	return 0;
}
