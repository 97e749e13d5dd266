// SPDX-License-Identifier: MIT
/*
 * Writers kept open a moment after their last close (issue 8's
 * append-loop).
 *
 * `echo line >> log` opens, writes and closes. On a file backend each
 * open costs a member call (the bulkhead's hand-off to a worker thread and
 * back: tens of microseconds on these machines, more than the open itself)
 * and each last close another one to close the writer. An in-place writer
 * of one copy whose file went through FUSE passthrough and whose last
 * handle closed with nothing left to commit (its writes were stored as they
 * returned) is kept here under its key for LINGER_NS; the next open of
 * that key without O_TRUNC takes it back instead of opening the file again
 * (ofile.c's ofile_start), and a writer nobody took is closed by this
 * module's thread.
 *
 * Only while the name still holds that file. The writer's descriptor is
 * watched with inotify from its open on (smuxfs_linger_watch, right after
 * the writer opened the file by its name), added through /proc/self/fd (no
 * path of the backend is walked: nothing here can hang on a stuck
 * filesystem, and the kernel's queue is read without blocking). An unlink
 * of the file, a rename of it or over it, a chmod, chown or utimes of it -
 * through the mount or behind it on the backend directory - queues an
 * event before that call returns; every take first reads the queue and
 * drops the writers it names (an event while the writer was open spoils
 * its watch: not kept), so a writer whose name went is never handed out.
 * A rename through the mount drops every kept writer
 * (smuxfs_linger_drop_all): a directory above the file may have moved.
 *
 * Left (documented in docs/architecture.md): a directory above the file
 * renamed behind the mount is seen up to LINGER_NS late (an open of the old
 * path in that window appends to the file at its new path, where an open
 * would have failed ENOENT); a rename racing the writer's open itself
 * (between its openat and the watch, microseconds) is not seen. inotify
 * does not report what another host changes on a network filesystem, so
 * main.c does not start this module when a file backend's directory is on
 * one (smux_config_remote_file).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/fs.h"
#include "smux/backend.h"
#include "smux/ctx.h"

/* How long a writer nobody took back stays open. Back-to-back appends
 * (a shell loop, make's log) come microseconds apart; a log written once
 * a second gains nothing from a longer wait and would hold the file open
 * for nothing. */
#define LINGER_NS (200LL * 1000 * 1000)
/* The time a writer is kept: LINGER_NS; a test hook (test_linger.c sets
 * it longer, so a loaded machine cannot expire what a test takes back). */
_Atomic int64_t smuxfs__linger_ns = LINGER_NS;
/* Kept writers at most: each holds a descriptor and a watch. */
#define LINGER_MAX 32

/* What an inotify event of a kept file means: its name may no longer hold
 * it (unlinked, replaced, moved) or it changed behind the writer's back
 * (mode, owner, times). IN_IGNORED comes with every removal of a watch. */
#define LINGER_EVENTS (IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF)

/* A writer kept, closed by nobody yet. */
struct kept {
	char *key;
	struct smux_writer *w;
	struct smuxfs_pt_reg reg; /* its file's passthrough registration */
	int wd;
	int64_t until;
};

/* The watch of a writer taken back and open again: it stays (no watch
 * removed and added again per append), and an event while the writer is
 * open (a chmod through it, an unlink) spoils it for the next offer. */
struct out {
	int wd;
	bool bad;
};

struct smuxfs_linger {
	pthread_mutex_t lock; /* protects everything below but the fds */
	struct smuxfs *fs;    /* immutable */
	int ifd;	      /* inotify, non-blocking; immutable */
	int efd;	      /* eventfd waking the thread; immutable */
	pthread_t thread;
	bool stopping;
	bool off;  /* a member not on a local disk came (smuxfs_linger_off) */
	bool idle; /* the thread sleeps until woken: nothing was kept */
	unsigned n;
	struct kept k[LINGER_MAX];
	unsigned nout;
	struct out o[LINGER_MAX];
};

/* Writers taken out of the table, closed after its lock is released
 * (a close is a member call), with their registrations. */
struct gone {
	unsigned n;
	struct smux_writer *w[LINGER_MAX + 1];
	struct smuxfs_pt_reg reg[LINGER_MAX + 1];
};

static void gone_close(struct smuxfs_linger *L, struct gone *g)
{
	for (unsigned i = 0; i < g->n; i++) {
		smuxfs_pt_reg_close(L->fs, &g->reg[i]);
		smux_writer_close(g->w[i]);
	}
	g->n = 0;
}

/* Removes entry @i (its watch too unless @watched is false: the kernel
 * removed it already). Caller holds lock. */
static void kept_remove(struct smuxfs_linger *L, unsigned i, bool watched,
			struct gone *g)
{
	struct kept *k = &L->k[i];

	if (watched)
		(void)inotify_rm_watch(L->ifd, k->wd);
	if (g) {
		g->reg[g->n] = k->reg;
		g->w[g->n++] = k->w;
	}
	free(k->key);
	L->k[i] = L->k[--L->n];
}

static int kept_by_wd(struct smuxfs_linger *L, int wd)
{
	for (unsigned i = 0; i < L->n; i++)
		if (L->k[i].wd == wd)
			return (int)i;
	return -1;
}

static int kept_by_key(struct smuxfs_linger *L, const char *key)
{
	for (unsigned i = 0; i < L->n; i++)
		if (strcmp(L->k[i].key, key) == 0)
			return (int)i;
	return -1;
}

static int out_by_wd(struct smuxfs_linger *L, int wd)
{
	for (unsigned i = 0; i < L->nout; i++)
		if (L->o[i].wd == wd)
			return (int)i;
	return -1;
}

/* Reads every queued event (never blocks): drops the kept writers they
 * name and spoils the watches of open ones; an overflowed queue does so
 * to all. Caller holds lock. */
static void drain(struct smuxfs_linger *L, struct gone *g)
{
	char buf[4096]
		__attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t len = read(L->ifd, buf, sizeof(buf));
		const char *p;

		if (len <= 0)
			return; /* EAGAIN: the queue is empty */
		for (p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const void *)p;
			int i;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				while (L->n)
					kept_remove(L, L->n - 1, true, g);
				for (unsigned j = 0; j < L->nout; j++)
					L->o[j].bad = true;
				continue;
			}
			i = kept_by_wd(L, ev->wd);
			if (i >= 0) {
				kept_remove(L, (unsigned)i,
					    !(ev->mask & IN_IGNORED), g);
				continue;
			}
			i = out_by_wd(L, ev->wd);
			if (i >= 0)
				L->o[i].bad = true;
		}
		/* a read takes every event that fits: one that left room
		 * for the longest emptied the queue as it then was */
		if ((size_t)len + sizeof(struct inotify_event) + NAME_MAX + 1 <=
		    sizeof(buf))
			return;
	}
}

/* Drops the writers kept past their time. Caller holds lock. */
static void expire(struct smuxfs_linger *L, int64_t now, struct gone *g)
{
	for (unsigned i = L->n; i-- > 0;)
		if (L->k[i].until <= now)
			kept_remove(L, i, true, g);
}

/*
 * Closes what expired, and what the queue says went, on its own: a writer
 * nobody takes back must not hold its file open. It sleeps until the next
 * expiry (woken only to start that clock: never by the inotify queue,
 * whose every take adds an event), so a loop of appends wakes it about
 * once per LINGER_NS, not once per append.
 */
static void *linger_main(void *arg)
{
	struct smuxfs_linger *L = arg;

	pthread_setname_np(pthread_self(), "smux:linger");
	pthread_mutex_lock(&L->lock);
	while (!L->stopping) {
		struct pollfd p = {.fd = L->efd, .events = POLLIN};
		int64_t now = smux_now_ns(), next = INT64_MAX;
		struct gone g = {0};
		uint64_t v;
		int ms = -1;

		drain(L, &g);
		expire(L, now, &g);
		for (unsigned i = 0; i < L->n; i++)
			if (L->k[i].until < next)
				next = L->k[i].until;
		if (next != INT64_MAX)
			ms = (int)((next - now) / 1000000) + 1;
		L->idle = ms < 0;
		pthread_mutex_unlock(&L->lock);
		gone_close(L, &g);
		if (poll(&p, 1, ms) > 0)
			(void)!read(L->efd, &v, sizeof(v));
		pthread_mutex_lock(&L->lock);
	}
	pthread_mutex_unlock(&L->lock);
	return NULL;
}

static void wake(struct smuxfs_linger *L)
{
	uint64_t one = 1;

	(void)!write(L->efd, &one, sizeof(one));
}

int smuxfs_linger_start(struct smuxfs *fs)
{
	struct smuxfs_linger *L = calloc(1, sizeof(*L));
	int rc;

	fs->linger = NULL;
	if (!L)
		return -ENOMEM;
	L->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	L->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	rc = L->ifd < 0 || L->efd < 0 ? errno : 0;
	L->fs = fs;
	if (rc == 0) {
		pthread_mutex_init(&L->lock, NULL);
		rc = pthread_create(&L->thread, NULL, linger_main, L);
		if (rc)
			pthread_mutex_destroy(&L->lock);
	}
	if (rc == 0) {
		fs->linger = L;
		return 0;
	}
	smux_log(LOG_WARNING, "writers are not kept between opens: %s",
		 strerror(rc));
	if (L->ifd >= 0)
		close(L->ifd);
	if (L->efd >= 0)
		close(L->efd);
	free(L);
	return -rc;
}

/* Ends the watch @wd of a writer taken back. Caller holds lock. */
static void out_end(struct smuxfs_linger *L, int wd)
{
	int j = out_by_wd(L, wd);

	if (j >= 0)
		L->o[j] = L->o[--L->nout];
	(void)inotify_rm_watch(L->ifd, wd);
}

int smuxfs_linger_watch(struct smuxfs *fs, struct smux_writer *w)
{
	struct smuxfs_linger *L = fs->linger;
	char path[64];
	int fd, wd = -1;

	if (!L)
		return -1;
	fd = smux_writer_passthrough_fd(w);
	if (fd < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	pthread_mutex_lock(&L->lock);
	if (!L->stopping && L->nout < LINGER_MAX) {
		wd = inotify_add_watch(L->ifd, path, LINGER_EVENTS);
		/* the same file watched already (another writer of it open
		 * or kept): one watch for both, so none for this one */
		if (wd >= 0 &&
		    (kept_by_wd(L, wd) >= 0 || out_by_wd(L, wd) >= 0))
			wd = -1;
		else if (wd >= 0)
			L->o[L->nout++] = (struct out){.wd = wd};
	}
	pthread_mutex_unlock(&L->lock);
	return wd < 0 ? -1 : wd;
}

bool smuxfs_linger_offer(struct smuxfs *fs, const char *key,
			 struct smux_writer *w, int wd,
			 struct smuxfs_pt_reg *reg)
{
	struct smuxfs_linger *L = fs->linger;
	struct gone g = {0};
	bool kept = false;
	int i, j;

	if (!L || wd < 0)
		return false;
	pthread_mutex_lock(&L->lock);
	if (L->stopping || L->off || smux_writer_passthrough_fd(w) < 0 ||
	    strcmp(w->key, key) != 0)
		goto refuse;
	/* Still good unless an event came since the watch began (at the
	 * writer's open). The queue is not read here (a syscall per append
	 * saved): an event not read yet names this writer's watch when the
	 * next take reads it, and the writer is dropped then. */
	j = out_by_wd(L, wd);
	if (j < 0 || L->o[j].bad)
		goto refuse;
	L->o[j] = L->o[--L->nout];
	i = kept_by_key(L, key);
	if (i >= 0) /* an older writer of the key: this one is newer */
		kept_remove(L, (unsigned)i, true, &g);
	if (L->n == LINGER_MAX) { /* the oldest goes */
		unsigned old = 0;

		for (unsigned k = 1; k < L->n; k++)
			if (L->k[k].until < L->k[old].until)
				old = k;
		kept_remove(L, old, true, &g);
	}
	L->k[L->n].key = strdup(key);
	if (!L->k[L->n].key) {
		(void)inotify_rm_watch(L->ifd, wd);
		goto out;
	}
	L->k[L->n].w = w;
	L->k[L->n].reg = (struct smuxfs_pt_reg){0};
	if (reg) {
		L->k[L->n].reg = *reg;
		*reg = (struct smuxfs_pt_reg){0};
	}
	L->k[L->n].wd = wd;
	L->k[L->n].until = smux_now_ns() + atomic_load(&smuxfs__linger_ns);
	L->n++;
	if (L->idle) { /* its clock starts */
		L->idle = false;
		wake(L);
	}
	kept = true;
	goto out;
refuse:
	out_end(L, wd);
out:
	pthread_mutex_unlock(&L->lock);
	gone_close(L, &g);
	return kept;
}

struct smux_writer *smuxfs_linger_take(struct smuxfs *fs, const char *key,
				       int *wd, struct smuxfs_pt_reg *reg)
{
	struct smuxfs_linger *L = fs->linger;
	struct smuxfs_pt_reg drop = {0}; /* a registration nobody wants */
	struct smux_writer *w = NULL;
	struct gone g = {0};
	int i;

	*wd = -1;
	if (reg)
		*reg = (struct smuxfs_pt_reg){0};
	if (!L)
		return NULL;
	pthread_mutex_lock(&L->lock);
	if (L->n) {
		/* what happened to the kept files up to now */
		drain(L, &g);
		i = kept_by_key(L, key);
		if (i >= 0 && L->k[i].until > smux_now_ns()) {
			w = L->k[i].w;
			drop = L->k[i].reg;
			if (reg) {
				*reg = drop;
				drop = (struct smuxfs_pt_reg){0};
			}
			if (L->nout < LINGER_MAX) { /* its watch goes on */
				*wd = L->k[i].wd;
				L->o[L->nout++] = (struct out){.wd = *wd};
			}
			kept_remove(L, (unsigned)i, *wd < 0, NULL);
		} else if (i >= 0) {
			kept_remove(L, (unsigned)i, true, &g);
		}
	}
	pthread_mutex_unlock(&L->lock);
	gone_close(L, &g);
	smuxfs_pt_reg_close(fs, &drop);
	return w;
}

void smuxfs_linger_unwatch(struct smuxfs *fs, int wd)
{
	struct smuxfs_linger *L = fs->linger;

	if (!L || wd < 0)
		return;
	pthread_mutex_lock(&L->lock);
	out_end(L, wd);
	pthread_mutex_unlock(&L->lock);
}

void smuxfs_linger_drop_all(struct smuxfs *fs)
{
	struct smuxfs_linger *L = fs->linger;
	struct gone g = {0};

	if (!L)
		return;
	pthread_mutex_lock(&L->lock);
	while (L->n)
		kept_remove(L, L->n - 1, true, &g);
	for (unsigned j = 0; j < L->nout; j++) /* open ones stay open */
		L->o[j].bad = true;
	pthread_mutex_unlock(&L->lock);
	gone_close(L, &g);
}

void smuxfs_linger_off(struct smuxfs *fs, const char *path)
{
	struct smuxfs_linger *L = fs->linger;
	bool was;

	if (!L)
		return;
	pthread_mutex_lock(&L->lock);
	was = L->off;
	L->off = true;
	pthread_mutex_unlock(&L->lock);
	smuxfs_linger_drop_all(fs);
	if (!was)
		smux_log(LOG_INFO,
			 "writers are not kept between opens any more: %s is "
			 "not on a local disk",
			 path);
}

unsigned smuxfs_linger_count(struct smuxfs *fs)
{
	struct smuxfs_linger *L = fs->linger;
	unsigned n;

	if (!L)
		return 0;
	pthread_mutex_lock(&L->lock);
	n = L->n;
	pthread_mutex_unlock(&L->lock);
	return n;
}

void smuxfs_linger_stop(struct smuxfs *fs)
{
	struct smuxfs_linger *L = fs->linger;

	if (!L)
		return;
	pthread_mutex_lock(&L->lock);
	L->stopping = true;
	pthread_mutex_unlock(&L->lock);
	wake(L);
	pthread_join(L->thread, NULL);
	smuxfs_linger_drop_all(fs);
	fs->linger = NULL;
	close(L->ifd);
	close(L->efd);
	pthread_mutex_destroy(&L->lock);
	free(L);
}
