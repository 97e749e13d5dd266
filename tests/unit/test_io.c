/* SPDX-License-Identifier: MIT */
/*
 * test_io.c - sources and sinks (smux/io.h): reads at every position of
 * each source kind, short sources, concurrent readers; each sink kind's
 * limits, growth, offsets and rewinding; smux_io_copy cancelled midway.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "smux/ctx.h"
#include "smux/io.h"

#define DATA_LEN 1000

/* Byte @i of the test pattern: not periodic in any small power of two. */
static unsigned char pat(uint64_t i)
{
	return (unsigned char)((i * 7 + i / 251) ^ 0x5a);
}

static unsigned char *pattern(size_t len)
{
	unsigned char *p = malloc(len ? len : 1);

	assert_non_null(p);
	for (size_t i = 0; i < len; i++)
		p[i] = pat(i);
	return p;
}

static void check_pattern(const unsigned char *p, uint64_t from, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(from + i))
			fail_msg("byte %llu: %u, want %u",
				 (unsigned long long)(from + i), p[i],
				 pat(from + i));
}

/* An unnamed temporary file (removed on close). */
static int tmp_fd(void)
{
	char path[] = "/tmp/smux-test-io-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	return fd;
}

static void write_all(int fd, const void *buf, size_t len, off_t off)
{
	assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
}

/* ---- sources ---- */

/* A callback source over the pattern that returns at most `max_chunk`
 * bytes per call and nothing from `ends_at` on (a short source). */
struct cb_src {
	uint64_t ends_at;
	size_t max_chunk;
	int fail_errno; /* returned for reads at or past fail_at */
	uint64_t fail_at;
	atomic_int calls;
};

static long cb_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	struct cb_src *c = arg;
	unsigned char *d = dst;

	atomic_fetch_add(&c->calls, 1);
	if (c->fail_errno && pos >= c->fail_at)
		return -c->fail_errno;
	if (pos >= c->ends_at)
		return 0;
	if (len > c->ends_at - pos)
		len = (size_t)(c->ends_at - pos);
	if (c->max_chunk && len > c->max_chunk)
		len = c->max_chunk;
	for (size_t i = 0; i < len; i++)
		d[i] = pat(pos + i);
	return (long)len;
}

/*
 * Reads at every position 0..length+2 with several lengths: each read
 * returns min(len, length - pos) bytes of the pattern, 0 past the end, and
 * never writes past what it returns.
 */
static void read_everywhere(const struct smux_source *s)
{
	static const size_t lens[] = {0, 1, 7, 64, DATA_LEN, 5000};
	unsigned char buf[5000 + 16];

	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		for (uint64_t pos = 0; pos <= s->length + 2; pos++) {
			size_t want = pos >= s->length ? 0
				      : lens[l] < s->length - pos
					      ? lens[l]
					      : (size_t)(s->length - pos);
			long n;

			memset(buf, 0xee, want + 16);
			n = smux_source_read(s, pos, buf, lens[l]);
			assert_int_equal(n, want);
			check_pattern(buf, pos, want);
			for (size_t i = want; i < want + 16; i++)
				assert_int_equal(buf[i], 0xee);
		}
	}
}

static void test_source_buf(void **state)
{
	unsigned char *data = pattern(DATA_LEN);
	struct smux_source s;

	(void)state;
	smux_source_buf(&s, data, DATA_LEN);
	assert_int_equal(s.kind, SMUX_SOURCE_BUF);
	assert_int_equal(s.length, DATA_LEN);
	read_everywhere(&s);
	smux_source_buf(&s, data, 0);
	read_everywhere(&s);
	free(data);
}

static void test_source_fd(void **state)
{
	unsigned char *data = pattern(DATA_LEN);
	unsigned char junk[100];
	struct smux_source s;
	int fd = tmp_fd();

	(void)state;
	/* the range sits between junk the source must never return */
	memset(junk, 'J', sizeof(junk));
	write_all(fd, junk, sizeof(junk), 0);
	write_all(fd, data, DATA_LEN, 100);
	write_all(fd, junk, sizeof(junk), 100 + DATA_LEN);
	smux_source_fd(&s, fd, 100, DATA_LEN);
	assert_int_equal(s.kind, SMUX_SOURCE_FD);
	read_everywhere(&s);
	/* the file position is never used */
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
	close(fd);
	free(data);
}

static void test_source_cb(void **state)
{
	struct cb_src c = {.ends_at = DATA_LEN, .max_chunk = 3};
	struct smux_source s;
	unsigned char buf[DATA_LEN];

	(void)state;
	smux_source_cb(&s, cb_read, &c, DATA_LEN);
	assert_int_equal(s.kind, SMUX_SOURCE_CB);
	read_everywhere(&s);
	/* short callback reads are joined into one full read */
	atomic_store(&c.calls, 0);
	assert_int_equal(smux_source_read(&s, 0, buf, DATA_LEN), DATA_LEN);
	check_pattern(buf, 0, DATA_LEN);
	assert_int_equal(atomic_load(&c.calls), (DATA_LEN + 2) / 3);
}

static void test_source_short(void **state)
{
	struct cb_src c = {.ends_at = DATA_LEN - 10};
	struct smux_source s;
	unsigned char buf[DATA_LEN];
	int fd = tmp_fd();

	(void)state;
	/* a callback source that ends 10 bytes early */
	smux_source_cb(&s, cb_read, &c, DATA_LEN);
	assert_int_equal(smux_source_read(&s, 0, buf, DATA_LEN - 10),
			 DATA_LEN - 10);
	assert_int_equal(smux_source_read(&s, 0, buf, DATA_LEN), -EIO);
	assert_int_equal(smux_source_read(&s, DATA_LEN - 10, buf, 1), -EIO);
	assert_int_equal(smux_source_read(&s, DATA_LEN - 1, buf, 100), -EIO);

	/* a file shorter than the range */
	write_all(fd, buf, 50, 0);
	smux_source_fd(&s, fd, 0, 100);
	assert_int_equal(smux_source_read(&s, 0, buf, 50), 50);
	assert_int_equal(smux_source_read(&s, 0, buf, 100), -EIO);
	smux_source_fd(&s, fd, 60, 10);
	assert_int_equal(smux_source_read(&s, 0, buf, 10), -EIO);
	close(fd);

	/* a bad fd and a failing callback keep their errno */
	smux_source_fd(&s, -1, 0, 10);
	assert_int_equal(smux_source_read(&s, 0, buf, 10), -EBADF);
	c = (struct cb_src){
		.ends_at = DATA_LEN,
		.max_chunk = 100,
		.fail_errno = EACCES,
		.fail_at = 500,
	};
	smux_source_cb(&s, cb_read, &c, DATA_LEN);
	assert_int_equal(smux_source_read(&s, 0, buf, 500), 500);
	assert_int_equal(smux_source_read(&s, 0, buf, 600), -EACCES);
}

#define READERS	   4
#define READS_EACH 500
#define BIG_LEN	   ((size_t)256 * 1024)

struct reader {
	const struct smux_source *src;
	unsigned seed;
	int bad; /* reads that returned wrong bytes or counts */
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	unsigned char buf[2048];

	for (int i = 0; i < READS_EACH; i++) {
		uint64_t pos = (uint64_t)rand_r(&r->seed) % r->src->length;
		size_t len = (size_t)rand_r(&r->seed) % sizeof(buf) + 1;
		size_t want = len < r->src->length - pos
				      ? len
				      : (size_t)(r->src->length - pos);
		long n = smux_source_read(r->src, pos, buf, len);

		if (n != (long)want) {
			r->bad++;
			continue;
		}
		for (size_t j = 0; j < want; j++)
			if (buf[j] != pat(pos + j)) {
				r->bad++;
				break;
			}
	}
	return NULL;
}

static void concurrent_reads(const struct smux_source *s)
{
	pthread_t t[READERS];
	struct reader r[READERS];

	for (int i = 0; i < READERS; i++) {
		r[i] = (struct reader){.src = s, .seed = 17u * (unsigned)i};
		assert_int_equal(
			pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
	}
	for (int i = 0; i < READERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].bad, 0);
	}
}

/* One source feeds several readers at once (a mirror fan-out). */
static void test_source_concurrent(void **state)
{
	unsigned char *data = pattern(BIG_LEN);
	struct cb_src c = {.ends_at = BIG_LEN, .max_chunk = 1000};
	struct smux_source s;
	int fd = tmp_fd();

	(void)state;
	write_all(fd, "xyz", 3, 0);
	write_all(fd, data, BIG_LEN, 3);
	smux_source_fd(&s, fd, 3, BIG_LEN);
	concurrent_reads(&s);
	smux_source_buf(&s, data, BIG_LEN);
	concurrent_reads(&s);
	smux_source_cb(&s, cb_read, &c, BIG_LEN);
	concurrent_reads(&s);
	close(fd);
	free(data);
}

/* ---- sinks ---- */

static void test_sink_buf(void **state)
{
	unsigned char mem[16];
	struct smux_sink s;

	(void)state;
	memset(mem, '#', sizeof(mem));
	smux_sink_buf(&s, mem, 10);
	assert_int_equal(s.kind, SMUX_SINK_BUF);
	assert_true(smux_sink_can_rewind(&s));
	assert_int_equal(smux_sink_write(&s, "abcd", 4), 0);
	assert_int_equal(smux_sink_write(&s, "efghij", 6), 0);
	assert_int_equal(s.written, 10);
	assert_memory_equal(mem, "abcdefghij", 10);
	/* full: one more byte overflows, an empty write does not */
	assert_int_equal(smux_sink_write(&s, "k", 1), -ENOBUFS);
	assert_int_equal(smux_sink_write(&s, "k", 0), 0);
	assert_int_equal(s.written, 10);
	for (size_t i = 10; i < sizeof(mem); i++)
		assert_int_equal(mem[i], '#');

	/* an overflowing write is refused whole */
	assert_int_equal(smux_sink_rewind(&s), 0);
	assert_int_equal(s.written, 0);
	assert_int_equal(smux_sink_write(&s, "0123", 4), 0);
	assert_int_equal(smux_sink_write(&s, "0123456", 7), -ENOBUFS);
	assert_int_equal(s.written, 4);
	assert_memory_equal(mem, "0123efghij", 10);
	for (size_t i = 10; i < sizeof(mem); i++)
		assert_int_equal(mem[i], '#');

	/* a zero-capacity sink takes nothing */
	smux_sink_buf(&s, mem, 0);
	assert_int_equal(smux_sink_write(&s, "a", 1), -ENOBUFS);
	smux_sink_release(&s); /* no-op */
	assert_null(smux_sink_dyn_take(&s, NULL));
}

static void test_sink_dyn_growth(void **state)
{
	const size_t total = 3 * 1024 * 1024 + 5;
	unsigned char *data = pattern(total);
	struct smux_sink s;
	unsigned char *got;
	size_t len = 1, off = 0, step = 1;

	(void)state;
	smux_sink_dyn(&s);
	assert_int_equal(s.kind, SMUX_SINK_DYN);
	assert_true(smux_sink_can_rewind(&s));
	/* nothing written: nothing to take */
	assert_null(smux_sink_dyn_take(&s, &len));
	assert_int_equal(len, 0);

	/* growing pieces, from 1 byte to whole chunks */
	while (off < total) {
		size_t n = step < total - off ? step : total - off;

		assert_int_equal(smux_sink_write(&s, data + off, n), 0);
		off += n;
		assert_int_equal(s.written, off);
		step = step * 3 + 1;
	}
	got = smux_sink_dyn_take(&s, &len);
	assert_non_null(got);
	assert_int_equal(len, total);
	assert_memory_equal(got, data, total);
	assert_int_equal(got[total], '\0');
	free(got);

	/* the sink is empty afterwards and usable again */
	assert_int_equal(s.written, 0);
	assert_null(smux_sink_dyn_take(&s, &len));
	assert_int_equal(smux_sink_write(&s, "hi", 2), 0);
	got = smux_sink_dyn_take(&s, NULL);
	assert_string_equal((char *)got, "hi");
	free(got);
	smux_sink_release(&s);
	free(data);
}

static void test_sink_dyn_rewind(void **state)
{
	struct smux_sink s;
	unsigned char *got;
	size_t len;

	(void)state;
	smux_sink_dyn(&s);
	assert_int_equal(smux_sink_write(&s, "a long first attempt", 20), 0);
	assert_int_equal(smux_sink_rewind(&s), 0);
	assert_int_equal(s.written, 0);
	assert_int_equal(smux_sink_write(&s, "retry", 5), 0);
	got = smux_sink_dyn_take(&s, &len);
	assert_int_equal(len, 5);
	assert_string_equal((char *)got, "retry");
	free(got);

	/* rewound with nothing written since: no stale bytes handed out */
	assert_int_equal(smux_sink_write(&s, "stale", 5), 0);
	assert_int_equal(smux_sink_rewind(&s), 0);
	got = smux_sink_dyn_take(&s, &len);
	assert_int_equal(len, 0);
	if (got)
		assert_string_equal((char *)got, "");
	free(got);

	/* release frees what was not taken (ASan checks the leak) */
	assert_int_equal(smux_sink_write(&s, "left", 4), 0);
	smux_sink_release(&s);
	smux_sink_release(&s);
	assert_null(smux_sink_dyn_take(&s, NULL));
}

static void test_sink_fd(void **state)
{
	unsigned char file[50], zs[50];
	struct smux_sink s;
	int fd = tmp_fd(), ro;

	(void)state;
	memset(zs, 'z', sizeof(zs));
	write_all(fd, zs, sizeof(zs), 0);
	smux_sink_fd(&s, fd, 10);
	assert_int_equal(s.kind, SMUX_SINK_FD);
	assert_true(smux_sink_can_rewind(&s));
	assert_int_equal(smux_sink_write(&s, "hello", 5), 0);
	assert_int_equal(smux_sink_write(&s, " world", 6), 0);
	assert_int_equal(s.written, 11);
	assert_int_equal(pread(fd, file, sizeof(file), 0), (ssize_t)50);
	assert_memory_equal(file, zs, 10);
	assert_memory_equal(file + 10, "hello world", 11);
	assert_memory_equal(file + 21, zs, 29);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);

	/* rewinding restarts at the sink's offset, not at 0 */
	assert_int_equal(smux_sink_rewind(&s), 0);
	assert_int_equal(smux_sink_write(&s, "HE", 2), 0);
	assert_int_equal(pread(fd, file, sizeof(file), 0), (ssize_t)50);
	assert_memory_equal(file, zs, 10);
	assert_memory_equal(file + 10, "HEllo world", 11);
	close(fd);

	/* a write error is the pwrite errno, and counts nothing */
	ro = open("/dev/null", O_RDONLY);
	assert_true(ro >= 0);
	smux_sink_fd(&s, ro, 0);
	assert_int_equal(smux_sink_write(&s, "x", 1), -EBADF);
	assert_int_equal(s.written, 0);
	close(ro);
}

struct cb_sink {
	unsigned char data[64];
	size_t len;
	int writes, rewinds;
	int fail_write;	 /* returned by the next write when nonzero */
	int fail_rewind; /* returned by rewinds when nonzero */
};

static int cbs_write(void *arg, const void *data, size_t len)
{
	struct cb_sink *c = arg;

	c->writes++;
	if (c->fail_write)
		return c->fail_write;
	assert_true(c->len + len <= sizeof(c->data));
	memcpy(c->data + c->len, data, len);
	c->len += len;
	return 0;
}

static int cbs_rewind(void *arg)
{
	struct cb_sink *c = arg;

	c->rewinds++;
	if (c->fail_rewind)
		return c->fail_rewind;
	c->len = 0;
	return 0;
}

static void test_sink_cb(void **state)
{
	struct cb_sink c = {0};
	struct smux_sink s;

	(void)state;
	smux_sink_cb(&s, cbs_write, cbs_rewind, &c);
	assert_int_equal(s.kind, SMUX_SINK_CB);
	assert_true(smux_sink_can_rewind(&s));
	assert_int_equal(smux_sink_write(&s, "abc", 3), 0);
	assert_int_equal(smux_sink_write(&s, "", 0), 0);
	assert_int_equal(s.written, 3);
	assert_int_equal(c.writes, 1);
	assert_memory_equal(c.data, "abc", 3);

	/* the callback's error stops the write and counts nothing */
	c.fail_write = -ENOSPC;
	assert_int_equal(smux_sink_write(&s, "def", 3), -ENOSPC);
	assert_int_equal(s.written, 3);
	c.fail_write = 0;

	/* rewind reaches the callback */
	assert_int_equal(smux_sink_rewind(&s), 0);
	assert_int_equal(c.rewinds, 1);
	assert_int_equal(s.written, 0);
	assert_int_equal(c.len, 0);
	assert_int_equal(smux_sink_write(&s, "xy", 2), 0);
	c.fail_rewind = -EPIPE;
	assert_int_equal(smux_sink_rewind(&s), -EPIPE);
	assert_int_equal(s.written, 2);

	/* without a rewind callback a sink cannot be rewound */
	memset(&c, 0, sizeof(c));
	smux_sink_cb(&s, cbs_write, NULL, &c);
	assert_false(smux_sink_can_rewind(&s));
	assert_int_equal(smux_sink_write(&s, "abc", 3), 0);
	assert_int_equal(smux_sink_rewind(&s), -ENOTSUP);
	assert_int_equal(s.written, 3);
	assert_int_equal(c.len, 3);
}

/* ---- smux_io_copy ---- */

static void test_copy_whole(void **state)
{
	const size_t total = 2 * SMUX_IO_CHUNK + 123;
	unsigned char *data = pattern(total), *got;
	struct smux_source src;
	struct smux_sink sink;
	struct smux_ctx ctx;
	struct smux_error err;
	size_t len;

	(void)state;
	smux_ctx_init(&ctx);
	smux_source_buf(&src, data, total);
	smux_sink_dyn(&sink);
	assert_int_equal(smux_io_copy(&ctx, &src, &sink, "cp", &err), 0);
	got = smux_sink_dyn_take(&sink, &len);
	assert_int_equal(len, total);
	assert_memory_equal(got, data, total);
	free(got);

	/* without a context, and an empty source */
	smux_sink_dyn(&sink);
	assert_int_equal(smux_io_copy(NULL, &src, &sink, "cp", NULL), 0);
	assert_int_equal(sink.written, total);
	smux_sink_release(&sink);
	smux_source_buf(&src, data, 0);
	smux_sink_dyn(&sink);
	assert_int_equal(smux_io_copy(&ctx, &src, &sink, "cp", &err), 0);
	assert_int_equal(sink.written, 0);
	smux_sink_release(&sink);
	free(data);
}

/* A source that fires a token once it is asked for bytes at `fire_at`. */
struct firing_src {
	struct cb_src inner;
	uint64_t fire_at;
	struct smux_cancel *token;
};

static long firing_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	struct firing_src *f = arg;

	if (pos >= f->fire_at)
		smux_cancel_fire(f->token, SMUX_CANCEL_ABORT);
	return cb_read(&f->inner, pos, dst, len);
}

static void test_copy_cancelled_midway(void **state)
{
	const uint64_t total = 4 * (uint64_t)SMUX_IO_CHUNK;
	struct smux_cancel token;
	struct firing_src f = {.inner = {.ends_at = total},
			       .fire_at = SMUX_IO_CHUNK};
	struct smux_source src;
	struct smux_sink sink;
	struct smux_ctx ctx;
	struct smux_error err;

	(void)state;
	smux_cancel_init(&token);
	f.token = &token;
	assert_int_equal(smux_ctx_derive(&ctx, NULL, 0, &token), 0);
	smux_source_cb(&src, firing_read, &f, total);
	smux_sink_dyn(&sink);
	smux_error_clear(&err);
	assert_int_equal(smux_io_copy(&ctx, &src, &sink, "cp", &err), -EINTR);
	assert_int_equal(err.e.code, SMUX_E_BACKEND_ABORTED);
	assert_string_equal(err.e.backend, "cp");
	/* it stopped at the next chunk boundary, well before the end */
	assert_in_range(sink.written, SMUX_IO_CHUNK, 2 * SMUX_IO_CHUNK);
	smux_sink_release(&sink);
	smux_cancel_release(&token);
}

static void test_copy_deadline_passed(void **state)
{
	unsigned char data[10] = "0123456789";
	struct smux_source src;
	struct smux_sink sink;
	struct smux_ctx ctx;
	struct smux_error err;

	(void)state;
	smux_ctx_init(&ctx);
	ctx.deadline_ns = smux_now_ns() - 1;
	smux_source_buf(&src, data, sizeof(data));
	smux_sink_dyn(&sink);
	assert_int_equal(smux_io_copy(&ctx, &src, &sink, "cp", &err),
			 -ETIMEDOUT);
	assert_int_equal(err.e.code, SMUX_E_BACKEND_TIMEOUT);
	assert_int_equal(sink.written, 0);
	smux_sink_release(&sink);
}

static void test_copy_errors(void **state)
{
	struct cb_src c = {.ends_at = 100, .fail_errno = EACCES, .fail_at = 0};
	unsigned char mem[10], data[100];
	struct smux_source src;
	struct smux_sink sink;
	struct smux_error err;

	(void)state;
	/* the source's errno decides the code */
	smux_source_cb(&src, cb_read, &c, 100);
	smux_sink_buf(&sink, mem, sizeof(mem));
	assert_int_equal(smux_io_copy(NULL, &src, &sink, "cp", &err), -EACCES);
	assert_int_equal(err.e.code, SMUX_E_PERMISSION_DENIED);
	assert_string_equal(err.e.backend, "cp");

	/* a short source is an I/O error */
	c = (struct cb_src){.ends_at = 50};
	smux_sink_buf(&sink, data, sizeof(data));
	assert_int_equal(smux_io_copy(NULL, &src, &sink, "cp", &err), -EIO);
	assert_int_equal(err.e.code, SMUX_E_IO);

	/* a full sink stops the copy with its errno */
	c = (struct cb_src){.ends_at = 100};
	smux_sink_buf(&sink, mem, sizeof(mem));
	assert_int_equal(smux_io_copy(NULL, &src, &sink, "cp", &err), -ENOBUFS);
	assert_int_equal(err.e.sys_errno, ENOBUFS);
	assert_int_equal(sink.written, 0);
	assert_int_equal(smux_io_copy(NULL, &src, &sink, "cp", NULL), -ENOBUFS);
}

int main(void)
{
	const struct CMUnitTest sources[] = {
		cmocka_unit_test(test_source_buf),
		cmocka_unit_test(test_source_fd),
		cmocka_unit_test(test_source_cb),
		cmocka_unit_test(test_source_short),
		cmocka_unit_test(test_source_concurrent),
	};
	const struct CMUnitTest sinks[] = {
		cmocka_unit_test(test_sink_buf),
		cmocka_unit_test(test_sink_dyn_growth),
		cmocka_unit_test(test_sink_dyn_rewind),
		cmocka_unit_test(test_sink_fd),
		cmocka_unit_test(test_sink_cb),
	};
	const struct CMUnitTest copy[] = {
		cmocka_unit_test(test_copy_whole),
		cmocka_unit_test(test_copy_cancelled_midway),
		cmocka_unit_test(test_copy_deadline_passed),
		cmocka_unit_test(test_copy_errors),
	};
	int failed = 0;

	failed +=
		cmocka_run_group_tests_name("io_sources", sources, NULL, NULL);
	failed += cmocka_run_group_tests_name("io_sinks", sinks, NULL, NULL);
	failed += cmocka_run_group_tests_name("io_copy", copy, NULL, NULL);
	return failed ? 1 : 0;
}
