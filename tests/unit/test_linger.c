/* SPDX-License-Identifier: MIT */
/*
 * test_linger.c - writers kept between opens (src/fs/linger.c), with a
 * writer kind of this test whose passthrough descriptor is a real file in
 * a temp directory:
 *   - an offered writer is taken back by its key (once), with its watch,
 *     and can be offered again with that watch;
 *   - a kept writer whose file is renamed away, renamed over, unlinked or
 *     chmod'ed is never taken back, and is closed; so is one whose file
 *     was renamed away, over or unlinked after its open (its watch) and
 *     before its offer;
 *   - a writer taken back whose file is unlinked while it is open is not
 *     taken back again; one of another key than its own is not kept;
 *   - expiry closes a writer nobody takes, without any call; drop_all
 *     closes them all and keeps no open one again; at most 32 are kept
 *     (the oldest closed); stop closes what is kept;
 *   - threads offering and taking their own keys while another drops all
 *     (run under TSan too): every writer is closed exactly once;
 *   - a writer's passthrough registration (struct smuxfs_pt_reg) is kept
 *     with it and comes back with it, and whatever drops the writer
 *     (a take that does not want it, a spoiled file, drop_all, stop)
 *     unregisters it, once (the FUSE device's ioctl, counted here).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"

static atomic_int opened, closed;

/* The FUSE device of test_registrations: passthrough.c's BACKING_CLOSE
 * ioctls on it are counted per id instead of reaching a kernel. */
#define FAKE_DEVFD 1000
static atomic_int unregistered[16];

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (fd == FAKE_DEVFD) {
		int32_t id = *(int32_t *)arg;

		if (id < 0 || id >= 16) {
			fail_msg("BACKING_CLOSE of id %d", (int)id);
			return -1;
		}
		atomic_fetch_add(&unregistered[id], 1);
		return 0;
	}
	return (int)syscall(SYS_ioctl, fd, req, arg);
}

struct fake_writer {
	struct smux_writer base;
	int fd;
};

static void fake_close(struct smux_writer *w)
{
	struct fake_writer *f = (struct fake_writer *)w;

	close(f->fd);
	free(w->key);
	free(f);
	atomic_fetch_add(&closed, 1);
}

static int fake_fd(struct smux_writer *w)
{
	return ((struct fake_writer *)w)->fd;
}

static const struct smux_writer_ops fake_ops = {
	.close = fake_close,
	.passthrough_fd = fake_fd,
};

/* Waits up to 5 s for @n closes in all: the module's thread may have read
 * the queue first, and it closes what it dropped after its lock. */
static void wait_closed(int n)
{
	for (int i = 0; i < 500 && atomic_load(&closed) < n; i++)
		usleep(10 * 1000);
	assert_int_equal(atomic_load(&closed), n);
}

struct fixture {
	struct smuxfs fs;
	char dir[64];
};

/* A writer of @key over the file @name of the fixture's directory
 * (created). */
static struct smux_writer *fake_open(struct fixture *f, const char *key,
				     const char *name)
{
	struct fake_writer *w = calloc(1, sizeof(*w));
	char path[160];

	assert_non_null(w);
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	w->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(w->fd >= 0);
	w->base.ops = &fake_ops;
	w->base.key = strdup(key);
	assert_non_null(w->base.key);
	atomic_fetch_add(&opened, 1);
	return &w->base;
}

/* The watch a writer's open starts (ofile.c), asserted made. */
static int watched(struct fixture *f, struct smux_writer *w)
{
	int wd = smuxfs_linger_watch(&f->fs, w);

	assert_true(wd >= 0);
	return wd;
}

static void path_of(struct fixture *f, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", f->dir, name);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_linger.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	/* kept a minute: a stalled machine expires nothing a test takes
	 * back (test_expiry shortens it) */
	atomic_store(&smuxfs__linger_ns, 60LL * 1000 * 1000 * 1000);
	assert_int_equal(smuxfs_linger_start(&f->fs), 0);
	assert_non_null(f->fs.linger);
	atomic_store(&opened, 0);
	atomic_store(&closed, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	smuxfs_linger_stop(&f->fs);
	assert_null(f->fs.linger);
	/* whatever was kept is closed by stop: nothing leaks */
	assert_int_equal(atomic_load(&opened), atomic_load(&closed));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void test_offer_take(void **state)
{
	struct fixture *f = *state;
	struct smux_writer *w = fake_open(f, "log", "log"), *t;
	int wd, wd2;

	assert_true(smuxfs_linger_offer(&f->fs, "log", w, watched(f, w), NULL));
	assert_int_equal(smuxfs_linger_count(&f->fs), 1);
	assert_null(smuxfs_linger_take(&f->fs, "other", &wd, NULL));
	assert_int_equal(wd, -1);
	t = smuxfs_linger_take(&f->fs, "log", &wd, NULL);
	assert_ptr_equal(t, w);
	assert_true(wd >= 0);
	assert_null(smuxfs_linger_take(&f->fs, "log", &wd2, NULL));
	assert_int_equal(wd2, -1);
	/* closed again: kept again on the watch it came back with; stop
	 * closes it (teardown) */
	assert_true(smuxfs_linger_offer(&f->fs, "log", w, wd, NULL));
	assert_int_equal(smuxfs_linger_count(&f->fs), 1);
	assert_int_equal(atomic_load(&closed), 0);
}

/* offer -> take -> offer with the take's watch -> take: one writer all
 * along, no close */
static void test_round_trips(void **state)
{
	struct fixture *f = *state;
	struct smux_writer *w = fake_open(f, "log", "log"), *t;
	int wd = watched(f, w);

	for (int i = 0; i < 100; i++) {
		assert_true(smuxfs_linger_offer(&f->fs, "log", w, wd, NULL));
		t = smuxfs_linger_take(&f->fs, "log", &wd, NULL);
		assert_ptr_equal(t, w);
		assert_true(wd >= 0);
	}
	assert_int_equal(atomic_load(&closed), 0);
	smuxfs_linger_unwatch(&f->fs, wd);
	smux_writer_close(w);
}

/* What happens to the kept file: never taken back, closed. */
static void check_spoiled(struct fixture *f, void (*spoil)(struct fixture *))
{
	struct smux_writer *w = fake_open(f, "log", "log");
	int wd, before = atomic_load(&closed);

	assert_true(smuxfs_linger_offer(&f->fs, "log", w, watched(f, w), NULL));
	spoil(f);
	assert_null(smuxfs_linger_take(&f->fs, "log", &wd, NULL));
	wait_closed(before + 1);
	assert_int_equal(smuxfs_linger_count(&f->fs), 0);
}

static void moved_away(struct fixture *f)
{
	char a[160], b[160];

	path_of(f, "log", a, sizeof(a));
	path_of(f, "log.1", b, sizeof(b));
	assert_int_equal(rename(a, b), 0);
}

static void renamed_over(struct fixture *f)
{
	char a[160], b[160];
	int fd;

	path_of(f, "new", a, sizeof(a));
	path_of(f, "log", b, sizeof(b));
	fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rename(a, b), 0);
}

static void unlinked(struct fixture *f)
{
	char a[160];

	path_of(f, "log", a, sizeof(a));
	assert_int_equal(unlink(a), 0);
}

static void chmoded(struct fixture *f)
{
	char a[160];

	path_of(f, "log", a, sizeof(a));
	assert_int_equal(chmod(a, 0600), 0);
}

/* The same, done while the writer is still open (watched from its open,
 * not yet offered: logrotate's mv while `echo >> log` runs). */
static void check_spoiled_open(struct fixture *f,
			       void (*spoil)(struct fixture *))
{
	struct smux_writer *w = fake_open(f, "log", "log");
	int wd = watched(f, w), before = atomic_load(&closed);

	spoil(f);
	if (!smuxfs_linger_offer(&f->fs, "log", w, wd, NULL))
		smux_writer_close(w);
	assert_null(smuxfs_linger_take(&f->fs, "log", &wd, NULL));
	wait_closed(before + 1);
	assert_int_equal(smuxfs_linger_count(&f->fs), 0);
}

static void test_spoiled(void **state)
{
	struct fixture *f = *state;

	check_spoiled(f, moved_away);
	check_spoiled(f, renamed_over);
	check_spoiled(f, unlinked);
	check_spoiled(f, chmoded);
	check_spoiled_open(f, moved_away);
	check_spoiled_open(f, renamed_over);
	check_spoiled_open(f, unlinked);
}

static void test_spoiled_while_open(void **state)
{
	struct fixture *f = *state;
	struct smux_writer *w = fake_open(f, "log", "log"), *t;
	int wd;

	assert_true(smuxfs_linger_offer(&f->fs, "log", w, watched(f, w), NULL));
	t = smuxfs_linger_take(&f->fs, "log", &wd, NULL);
	assert_ptr_equal(t, w);
	unlinked(f);
	/* kept or refused (the queue is read by takes), never taken back:
	 * closed here or by the take */
	if (!smuxfs_linger_offer(&f->fs, "log", w, wd, NULL))
		smux_writer_close(w);
	assert_null(smuxfs_linger_take(&f->fs, "log", &wd, NULL));
	wait_closed(1);
	assert_int_equal(smuxfs_linger_count(&f->fs), 0);

	/* of another key than its own: not kept */
	w = fake_open(f, "a", "a");
	assert_false(smuxfs_linger_offer(&f->fs, "b", w, watched(f, w), NULL));
	smux_writer_close(w);
}

static struct smuxfs_pt_reg reg_of(int32_t id)
{
	return (struct smuxfs_pt_reg){
		.held = true, .id = id, .dev = 1, .ino = (ino_t)id};
}

static void test_registrations(void **state)
{
	struct fixture *f = *state;
	struct smux_writer *w = fake_open(f, "log", "log"), *t;
	struct smuxfs_pt_reg r = reg_of(5), back;
	int wd;

	atomic_store(&f->fs.pt.devfd, FAKE_DEVFD);
	for (int i = 0; i < 16; i++)
		atomic_store(&unregistered[i], 0);
	/* kept with the writer (moved out of the caller's), given back */
	assert_true(smuxfs_linger_offer(&f->fs, "log", w, watched(f, w), &r));
	assert_false(r.held);
	t = smuxfs_linger_take(&f->fs, "log", &wd, &back);
	assert_ptr_equal(t, w);
	assert_true(back.held);
	assert_int_equal(back.id, 5);
	assert_int_equal(back.ino, 5);
	assert_int_equal(atomic_load(&unregistered[5]), 0);
	/* a take that does not want it unregisters it */
	assert_true(smuxfs_linger_offer(&f->fs, "log", w, wd, &back));
	t = smuxfs_linger_take(&f->fs, "log", &wd, NULL);
	assert_ptr_equal(t, w);
	assert_int_equal(atomic_load(&unregistered[5]), 1);
	/* a refused offer leaves it to the caller */
	r = reg_of(6);
	assert_false(smuxfs_linger_offer(&f->fs, "other", w, wd, &r));
	assert_true(r.held);
	assert_int_equal(atomic_load(&unregistered[6]), 0);
	smux_writer_close(w);
	/* a writer dropped because its file went: unregistered with it */
	w = fake_open(f, "log", "log");
	assert_true(smuxfs_linger_offer(&f->fs, "log", w, watched(f, w), &r));
	unlinked(f);
	assert_null(smuxfs_linger_take(&f->fs, "log", &wd, &back));
	assert_false(back.held);
	wait_closed(2);
	assert_int_equal(atomic_load(&unregistered[6]), 1);
	/* drop_all and stop */
	w = fake_open(f, "log", "log");
	r = reg_of(7);
	assert_true(smuxfs_linger_offer(&f->fs, "log", w, watched(f, w), &r));
	smuxfs_linger_drop_all(&f->fs);
	assert_int_equal(atomic_load(&unregistered[7]), 1);
	w = fake_open(f, "log2", "log2");
	r = reg_of(8);
	assert_true(smuxfs_linger_offer(&f->fs, "log2", w, watched(f, w), &r));
	smuxfs_linger_stop(&f->fs);
	assert_int_equal(atomic_load(&unregistered[8]), 1);
	assert_int_equal(smuxfs_linger_start(&f->fs), 0); /* for teardown */
	/* each exactly once */
	for (int i = 0; i < 16; i++)
		assert_true(atomic_load(&unregistered[i]) <= 1);
}

static void test_expiry(void **state)
{
	struct fixture *f = *state;
	struct smux_writer *w = fake_open(f, "log", "log");
	int wd;

	atomic_store(&smuxfs__linger_ns, 50LL * 1000 * 1000);
	assert_true(smuxfs_linger_offer(&f->fs, "log", w, watched(f, w), NULL));
	/* closed by the module's thread, nobody asking */
	wait_closed(1);
	assert_int_equal(smuxfs_linger_count(&f->fs), 0);
	assert_null(smuxfs_linger_take(&f->fs, "log", &wd, NULL));
}

static void test_drop_all_and_bound(void **state)
{
	struct fixture *f = *state;
	struct smux_writer *w, *open_one;
	char key[32];
	int wd;

	/* one taken back and open while the others are dropped */
	open_one = fake_open(f, "open", "open");
	assert_true(smuxfs_linger_offer(&f->fs, "open", open_one,
					watched(f, open_one), NULL));
	assert_ptr_equal(smuxfs_linger_take(&f->fs, "open", &wd, NULL),
			 open_one);
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "f%d", i);
		w = fake_open(f, key, key);
		assert_true(smuxfs_linger_offer(&f->fs, key, w, watched(f, w),
						NULL));
	}
	assert_int_equal(smuxfs_linger_count(&f->fs), 32);
	assert_int_equal(atomic_load(&closed), 8);
	/* the oldest went */
	assert_null(smuxfs_linger_take(&f->fs, "f0", &wd, NULL));
	smuxfs_linger_drop_all(&f->fs);
	assert_int_equal(smuxfs_linger_count(&f->fs), 0);
	wait_closed(40);
	/* the open one is not kept again after a drop_all */
	assert_false(smuxfs_linger_offer(&f->fs, "open", open_one, wd, NULL));
	smux_writer_close(open_one);
}

static void test_stop_closes(void **state)
{
	struct fixture *f = *state;
	struct smux_writer *a = fake_open(f, "a", "a"),
			   *b = fake_open(f, "b", "b");

	assert_true(smuxfs_linger_offer(&f->fs, "a", a, watched(f, a), NULL));
	assert_true(smuxfs_linger_offer(&f->fs, "b", b, watched(f, b), NULL));
	/* teardown's stop closes both (opened == closed there) */
}

struct racer {
	struct fixture *f;
	int id;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	struct smux_writer *w;
	char key[32];
	int wd = -1;

	snprintf(key, sizeof(key), "r%d", r->id);
	w = fake_open(r->f, key, key);
	wd = smuxfs_linger_watch(&r->f->fs, w);
	for (int i = 0; i < 2000; i++) {
		if (!smuxfs_linger_offer(&r->f->fs, key, w, wd, NULL)) {
			smux_writer_close(w);
			w = fake_open(r->f, key, key);
			wd = smuxfs_linger_watch(&r->f->fs, w);
			continue;
		}
		w = smuxfs_linger_take(&r->f->fs, key, &wd, NULL);
		if (!w) { /* dropped meanwhile: closed there */
			w = fake_open(r->f, key, key);
			wd = smuxfs_linger_watch(&r->f->fs, w);
		}
	}
	smuxfs_linger_unwatch(&r->f->fs, wd);
	smux_writer_close(w);
	return NULL;
}

static void *dropper_main(void *arg)
{
	struct fixture *f = arg;

	for (int i = 0; i < 200; i++) {
		smuxfs_linger_drop_all(&f->fs);
		usleep(100);
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct fixture *f = *state;
	struct racer r[3];
	pthread_t t[4];

	for (int i = 0; i < 3; i++) {
		r[i] = (struct racer){.f = f, .id = i};
		assert_int_equal(pthread_create(&t[i], NULL, racer_main, &r[i]),
				 0);
	}
	assert_int_equal(pthread_create(&t[3], NULL, dropper_main, f), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(smuxfs_linger_count(&f->fs), 0);
	assert_int_equal(atomic_load(&opened), atomic_load(&closed));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_offer_take, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_round_trips, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_spoiled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spoiled_while_open, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registrations, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_drop_all_and_bound, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stop_closes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
