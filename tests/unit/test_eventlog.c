/* SPDX-License-Identifier: MIT */
/*
 * test_eventlog.c - .smux/events' ring (src/fs/eventlog.c) and the log
 * levels of events (src/fs/evsyslog.c):
 *   - a reader waiting in poll(2) is notified after the ring's lock is
 *     released (a notification under the lock holds every reader and the
 *     bus's dispatcher behind the kernel's reply), exactly once, and a
 *     reader that closed is not notified;
 *   - every topic has a syslog level: backend.down and reconciled are
 *     warnings, the operator's changes and recoveries notices, the routine
 *     (hints, failovers, partial fan-outs) info.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/fs.h"
#include "smux/events.h"

static struct smuxfs *hook_fs;
static unsigned notified;
static bool notified_locked;
static struct fuse_pollhandle *notified_ph;

static void record_notify(struct fuse_pollhandle *ph)
{
	notified++;
	notified_ph = ph;
	if (smuxfs__eventlog_locked(hook_fs))
		notified_locked = true;
}

struct fixture {
	struct smuxfs fs;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->fs.events = smux_events_new();
	assert_non_null(f->fs.events);
	assert_int_equal(smuxfs_eventlog_start(&f->fs), 0);
	hook_fs = &f->fs;
	notified = 0;
	notified_locked = false;
	notified_ph = NULL;
	smuxfs__evlog_notify_hook = record_notify;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	smuxfs__evlog_notify_hook = NULL;
	smuxfs_eventlog_stop(&f->fs);
	smux_events_free(f->fs.events);
	free(f);
	return 0;
}

static void note(struct smuxfs *fs, const char *topic)
{
	json_t *j = json_pack("{s:s}", "topic", topic);

	assert_non_null(j);
	smuxfs_eventlog_note(fs, j);
	json_decref(j);
}

/* A poll handle the test never dereferences: the hook gets it back. */
static struct fuse_pollhandle *fake_ph(int *token)
{
	return (struct fuse_pollhandle *)(void *)token;
}

static void test_notify_after_unlock(void **state)
{
	struct fixture *f = *state;
	struct smuxfs_fh fh = {.ev_stream = true};
	int token;
	char buf[256];

	/* nothing to read: the handle waits */
	assert_int_equal(smuxfs_eventlog_poll(&f->fs, &fh, fake_ph(&token)), 0);
	assert_int_equal(notified, 0);
	note(&f->fs, "smuxfs.test");
	assert_int_equal(notified, 1);
	assert_ptr_equal(notified_ph, fake_ph(&token));
	assert_false(notified_locked);
	/* the line is there to read; a second line notifies no one */
	assert_true(smuxfs_eventlog_poll(&f->fs, &fh, NULL) & POLLIN);
	assert_true(smuxfs_eventlog_read(&f->fs, &fh, buf, sizeof(buf), 0) > 0);
	note(&f->fs, "smuxfs.test");
	assert_int_equal(notified, 1);
	smuxfs_eventlog_close(&f->fs, &fh);
}

static void test_closed_reader_not_notified(void **state)
{
	struct fixture *f = *state;
	struct smuxfs_fh a = {.ev_stream = true}, b = {.ev_stream = true};
	int ta, tb;

	assert_int_equal(smuxfs_eventlog_poll(&f->fs, &a, fake_ph(&ta)), 0);
	assert_int_equal(smuxfs_eventlog_poll(&f->fs, &b, fake_ph(&tb)), 0);
	/* a closes before the next line: the hook must not see its handle
	 * (close drops it; a fake one cannot be destroyed, so the test
	 * forgets it first) */
	a.ev_ph = NULL;
	smuxfs_eventlog_close(&f->fs, &a);
	note(&f->fs, "smuxfs.test");
	assert_int_equal(notified, 1);
	assert_ptr_equal(notified_ph, fake_ph(&tb));
	assert_false(notified_locked);
	smuxfs_eventlog_close(&f->fs, &b);
}

static void test_event_levels(void **state)
{
	(void)state;
	for (int t = 0; t < SMUX_TOPIC_COUNT; t++) {
		int l = smuxfs_event_level((enum smux_topic)t);

		assert_true(l == LOG_ERR || l == LOG_WARNING ||
			    l == LOG_NOTICE || l == LOG_INFO);
	}
	/* a configuration a server refused: every call fails until fixed */
	assert_int_equal(smuxfs_event_level(SMUX_EV_BACKEND_MISCONFIGURED),
			 LOG_ERR);
	assert_int_equal(smuxfs_event_level(SMUX_EV_BACKEND_DOWN), LOG_WARNING);
	assert_int_equal(smuxfs_event_level(SMUX_EV_RECONCILED), LOG_WARNING);
	assert_int_equal(smuxfs_event_level(SMUX_EV_BACKEND_RECOVERED),
			 LOG_NOTICE);
	assert_int_equal(smuxfs_event_level(SMUX_EV_DRAIN_STARTED), LOG_NOTICE);
	assert_int_equal(smuxfs_event_level(SMUX_EV_DRAIN_COMPLETED),
			 LOG_NOTICE);
	assert_int_equal(smuxfs_event_level(SMUX_EV_BACKEND_ADDED), LOG_NOTICE);
	assert_int_equal(smuxfs_event_level(SMUX_EV_BACKEND_REMOVED),
			 LOG_NOTICE);
	assert_int_equal(smuxfs_event_level(SMUX_EV_WEIGHT_CHANGED),
			 LOG_NOTICE);
	assert_int_equal(smuxfs_event_level(SMUX_EV_FAILOVER), LOG_INFO);
	assert_int_equal(smuxfs_event_level(SMUX_EV_FANOUT_PARTIAL), LOG_INFO);
	assert_int_equal(smuxfs_event_level(SMUX_EV_HINT_RECORDED), LOG_INFO);
	assert_int_equal(smuxfs_event_level(SMUX_EV_HINT_REPLAYED), LOG_INFO);
}

/* Lines of @path that contain @needle. */
static unsigned count_lines(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	char line[2048];
	unsigned n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

/*
 * A burst of routine events (an outage hinting a thousand writes) reaches
 * the log at most EVENT_LOG_PER_S a second; warnings always do; the lines
 * left out are counted in a notice before the next line logged. The log
 * is stderr (the foreground daemon's), captured in a file.
 */
static void test_event_log_rate_limited(void **state)
{
	char path[] = "/tmp/smux-evlog-XXXXXX";
	struct smux_event hint = {.topic = SMUX_EV_HINT_RECORDED};
	struct smux_event down = {.topic = SMUX_EV_BACKEND_DOWN};
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	unsigned hints, downs, notices;

	(void)state;
	assert_true(fd >= 0 && saved >= 0);
	snprintf(hint.mux, sizeof(hint.mux), "m");
	snprintf(hint.name, sizeof(hint.name), "b");
	snprintf(hint.key, sizeof(hint.key), "k");
	down = hint;
	down.topic = SMUX_EV_BACKEND_DOWN;
	fflush(stderr);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	smux_log_init(true, false);
	for (int i = 0; i < 1000; i++) {
		smuxfs_log_event(NULL, &hint);
		if (i % 250 == 0)
			smuxfs_log_event(NULL, &down);
	}
	smuxfs_log_event(NULL, &down);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fd);

	hints = count_lines(path, "storage-mux.hint.recorded");
	downs = count_lines(path, "storage-mux.backend.down");
	notices = count_lines(path, "not logged (more than");
	unlink(path);
	print_message("  1000 hint events: %u logged, %u notices; %u of 5 "
		      "warnings\n",
		      hints, notices, downs);
	/* 1000 calls take milliseconds: two one-second windows at most,
	 * unless the machine stalls for seconds between them */
	assert_true(hints >= 50 && hints < 1000);
	assert_int_equal(downs, 5);
	assert_true(notices >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_notify_after_unlock, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_closed_reader_not_notified,
						setup, teardown),
		cmocka_unit_test(test_event_levels),
		cmocka_unit_test(test_event_log_rate_limited),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
