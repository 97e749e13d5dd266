/* SPDX-License-Identifier: MIT */
/*
 * delq.c - the delete queue: unlinks on object stores acknowledged once
 * queued and sent in batches (issue 10: DeleteObjects for rm -r; issue 12:
 * Swift's bulk delete), with rmdir, fsync of a directory, a create over
 * the name and the unmount as barriers.
 *
 * rm -r unlinks one name at a time, each waiting for the last: one DELETE
 * per file, one round trip each. Here an unlink of a file nobody has open
 * is journaled and queued, and returns. A thread sends what is queued as
 * one smux_backend_del_many (S3 DeleteObjects, up to 1000 keys; Swift
 * bulk delete; a mux of several members deletes key by key, 8 at a time):
 * while one batch is out, the next gathers, so the first unlink costs one
 * round trip as before and the rest ride in batches.
 *
 * What a local filesystem promises, kept:
 *  - a queued name is gone at once for this mount: lookups answer ENOENT
 *    (smuxfs_delq_has), listings leave it out;
 *  - an operation that makes a name (create, mkdir, symlink, mknod, link,
 *    the destination of a rename) waits until that name's delete is done
 *    (smuxfs_delq_wait), so a queued delete never removes a newer object;
 *    rmdir, a directory rename and fsync of a directory wait for every
 *    queued delete under the directory, so rmdir's emptiness check sees
 *    the server empty and fsync(dir) returning 0 means the deletes are
 *    stored, as unlink(2) + fsync(dir) means on ext4;
 *  - the unmount sends what is queued before it returns;
 *  - a crash loses no acknowledged unlink: each is a line appended to
 *    state_dir/del-queue.<mount>.jsonl ({"key", "t", "etag"}; write(2),
 *    no fsync: like an unlink on ext4, it outlives the daemon, not a power
 *    loss before the directory is synced). The next mount deletes what the
 *    records name before serving, but only an object that is still the
 *    one unlinked: the same etag when one was known, else a stored mtime
 *    not after the unlink (another client may have written the name
 *    since). A journal is emptied whenever the queue is, and held with
 *    flock(2): a mount never replays a live mount's journal.
 *
 * A delete that fails on a transient error stays queued (the name stays
 * hidden) and is sent again with backoff, 1 s doubling to 30 s; waiters on
 * it get the error. One the store refuses (permission, a bad name) is
 * dropped from the queue with an error in the log: the name shows again,
 * as an unlink that failed.
 *
 * Owner of: struct smuxfs_delq (fs->delq). Every function may run on any
 * FUSE thread; one mutex, never held across a backend call or a journal
 * write... except the append, which is one write(2) of one line.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"
#include "smux/key.h"

#define DQ_PREFIX "del-queue."
#define DQ_SUFFIX ".jsonl"
/* keys per batch: S3's DeleteObjects limit */
#define DQ_BATCH 1000
/* queued names at most: an unlink past it waits (rm -r runs ahead of the
 * server by this much, no more) */
#define DQ_MAX		10000
#define DQ_RETRY_MIN_NS 1000000000LL
#define DQ_RETRY_MAX_NS 30000000000LL
/* a journal past this many bytes, and 4 times what its live lines take,
 * is written anew with the live lines only */
#define DQ_COMPACT_BYTES (1 << 20)

enum dq_state { DQ_QUEUED, DQ_SENDING };

struct dq_entry {
	char *key;
	int64_t t_ns;		  /* CLOCK_REALTIME of the unlink */
	char etag[SMUX_ETAG_MAX]; /* the object's, when known ("") */
	enum dq_state state;
	unsigned tries;
	int64_t retry_at; /* CLOCK_MONOTONIC ns */
	int last_rc;
	size_t line_len; /* its journal line */
	struct dq_entry *prev, *next;
};

struct smuxfs_delq {
	struct smuxfs *fs;
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* the sender: work, or stop */
	pthread_cond_t changed; /* waiters: a batch ended */
	pthread_t thread;
	bool started, stop;
	void *set; /* tsearch tree of entries, by key */
	struct dq_entry *head, *tail;
	atomic_size_t n;   /* entries (queued and being sent) */
	uint64_t failures; /* transient failures so far */
	int fd;		   /* the journal; -1: none */
	char path[PATH_MAX];
	uint64_t journal_bytes, live_bytes;
	/* counters for .smux and the tests */
	atomic_ulong batches, deleted, dropped, retried;
};

static int dq_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dq_entry *)a)->key,
		      ((const struct dq_entry *)b)->key);
}

static struct dq_entry *dq_find(struct smuxfs_delq *q, const char *key)
{
	struct dq_entry probe = {.key = (char *)key};
	void *found = tfind(&probe, &q->set, dq_cmp);

	return found ? *(struct dq_entry **)found : NULL;
}

static void dq_unlink_entry(struct smuxfs_delq *q, struct dq_entry *e)
{
	tdelete(e, &q->set, dq_cmp);
	if (e->prev)
		e->prev->next = e->next;
	else
		q->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		q->tail = e->prev;
	q->live_bytes -= e->line_len;
	atomic_fetch_sub(&q->n, 1);
	free(e->key);
	free(e);
}

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One journal line for @key ("\n" included), malloc'ed; NULL: no memory. */
static char *dq_line(const char *key, int64_t t_ns, const char *etag)
{
	json_t *j = json_pack("{s:s, s:I, s:s}", "key", key, "t",
			      (json_int_t)t_ns, "etag", etag);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	char *line = NULL;

	json_decref(j);
	if (text && asprintf(&line, "%s\n", text) < 0)
		line = NULL;
	free(text);
	return line;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The journal holds nothing but the live entries (under lock): emptied
 * when there are none, written anew when it grew far past them. */
static void dq_journal_trim(struct smuxfs_delq *q)
{
	char tmp[PATH_MAX + 8];
	int fd;

	if (q->fd < 0)
		return;
	if (!q->head) {
		if (q->journal_bytes && ftruncate(q->fd, 0) == 0)
			q->journal_bytes = 0;
		return;
	}
	if (q->journal_bytes < DQ_COMPACT_BYTES ||
	    q->journal_bytes < 4 * q->live_bytes)
		return;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", q->path) >= (int)sizeof(tmp))
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return;
	for (struct dq_entry *e = q->head; e; e = e->next) {
		char *line = dq_line(e->key, e->t_ns, e->etag);

		if (!line || write_all(fd, line, strlen(line)) != 0) {
			free(line);
			close(fd);
			unlink(tmp);
			return;
		}
		free(line);
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0 || rename(tmp, q->path) != 0) {
		close(fd);
		unlink(tmp);
		return;
	}
	close(q->fd); /* its lock goes with it; the new file holds one */
	q->fd = fd;
	q->journal_bytes = q->live_bytes;
}

/* What a failed delete means: transient (sent again) or the store's
 * refusal (the name shows again). */
static bool dq_refused(int rc)
{
	switch (-rc) {
	case EACCES:
	case EPERM:
	case EROFS:
	case EINVAL:
	case ENAMETOOLONG:
	case EISDIR:
	case ENOTEMPTY:
		return true;
	default:
		return false;
	}
}

/* Takes up to DQ_BATCH queued entries due by @now (under lock). */
static size_t dq_take(struct smuxfs_delq *q, int64_t now,
		      struct dq_entry **batch, int64_t *next_due)
{
	size_t n = 0;

	*next_due = INT64_MAX;
	for (struct dq_entry *e = q->head; e && n < DQ_BATCH; e = e->next) {
		if (e->state != DQ_QUEUED)
			continue;
		if (e->retry_at > now) {
			if (e->retry_at < *next_due)
				*next_due = e->retry_at;
			continue;
		}
		e->state = DQ_SENDING;
		batch[n++] = e;
	}
	return n;
}

static void dq_backoff(struct dq_entry *e, int rc, int64_t now)
{
	int64_t d = DQ_RETRY_MIN_NS;

	for (unsigned i = 1; i < e->tries && d < DQ_RETRY_MAX_NS; i++)
		d *= 2;
	if (d > DQ_RETRY_MAX_NS)
		d = DQ_RETRY_MAX_NS;
	e->state = DQ_QUEUED;
	e->last_rc = rc;
	e->retry_at = now + d;
}

/* Sends one batch (lock held on entry and exit, dropped around the call).
 * False when nothing was due. */
static bool dq_send(struct smuxfs_delq *q, struct dq_entry **batch,
		    const char **keys, int *rcs, int64_t *next_due)
{
	struct smuxfs *fs = q->fs;
	struct smux_error err;
	struct smux_ctx ctx;
	size_t n = dq_take(q, smux_now_ns(), batch, next_due), n_back = 0;
	int64_t now;

	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		keys[i] = batch[i]->key; /* stable: only this thread frees */
	pthread_mutex_unlock(&q->lock);
	smuxfs_ctx(&ctx);
	smux_backend_del_many(fs->root, &ctx, keys, n, rcs, &err);
	pthread_mutex_lock(&q->lock);
	now = smux_now_ns();
	atomic_fetch_add(&q->batches, 1);
	for (size_t i = 0; i < n; i++) {
		struct dq_entry *e = batch[i];

		e->tries++;
		if (rcs[i] == 0) {
			atomic_fetch_add(&q->deleted, 1);
			dq_unlink_entry(q, e);
		} else if (dq_refused(rcs[i])) {
			smux_log(LOG_ERR,
				 "unlink of \"%s\": the store refused the "
				 "delete: %s (the name shows again)",
				 e->key, strerror(-rcs[i]));
			atomic_fetch_add(&q->dropped, 1);
			/* the key stays valid in keys[] for the notes below */
			keys[n_back++] = strdup(e->key);
			if (!keys[n_back - 1])
				n_back--;
			dq_unlink_entry(q, e);
		} else {
			if (e->tries == 1)
				smux_log(LOG_WARNING,
					 "unlink of \"%s\": delete failed: %s "
					 "(kept queued, sent again)",
					 e->key, strerror(-rcs[i]));
			atomic_fetch_add(&q->retried, 1);
			q->failures++;
			dq_backoff(e, rcs[i], now);
		}
	}
	dq_journal_trim(q);
	pthread_cond_broadcast(&q->changed);
	if (n_back) {
		/* names that show again: the directories' known names and
		 * the cached listings learn it (outside our lock) */
		pthread_mutex_unlock(&q->lock);
		for (size_t i = 0; i < n_back; i++) {
			smuxfs_dirnames_add(fs, keys[i]);
			smuxfs_dircache_changed(fs, keys[i], false);
			free((char *)keys[i]);
		}
		pthread_mutex_lock(&q->lock);
	}
	return true;
}

static void *dq_thread(void *arg)
{
	struct smuxfs_delq *q = arg;
	struct dq_entry **batch = calloc(DQ_BATCH, sizeof(struct dq_entry *));
	const char **keys = malloc(DQ_BATCH * sizeof(*keys));
	int *rcs = malloc(DQ_BATCH * sizeof(*rcs));
	int64_t next_due = INT64_MAX;

	pthread_mutex_lock(&q->lock);
	while (batch && keys && rcs) {
		if (dq_send(q, batch, keys, rcs, &next_due))
			continue;
		if (q->stop)
			break; /* nothing due: what failed waits for the
				  next mount, in the journal */
		if (next_due == INT64_MAX) {
			pthread_cond_wait(&q->wake, &q->lock);
		} else {
			struct timespec ts;
			int64_t wait = next_due - smux_now_ns();

			clock_gettime(CLOCK_REALTIME, &ts);
			if (wait > 0) {
				int64_t at = (int64_t)ts.tv_sec * 1000000000LL +
					     ts.tv_nsec + wait;

				ts.tv_sec = at / 1000000000LL;
				ts.tv_nsec = at % 1000000000LL;
				pthread_cond_timedwait(&q->wake, &q->lock, &ts);
			}
		}
	}
	pthread_mutex_unlock(&q->lock);
	free(batch);
	free(keys);
	free(rcs);
	return NULL;
}

bool smuxfs_delq_has(struct smuxfs *fs, const char *key)
{
	struct smuxfs_delq *q = fs->delq;
	bool has;

	if (!q || atomic_load(&q->n) == 0)
		return false;
	pthread_mutex_lock(&q->lock);
	has = dq_find(q, key) != NULL;
	pthread_mutex_unlock(&q->lock);
	return has;
}

int smuxfs_delq_add(struct smuxfs *fs, const char *key)
{
	struct smuxfs_delq *q = fs->delq;
	struct dq_entry *e;
	struct smux_info info;
	char *line;
	int rc = 0, wrc;

	if (!q)
		return 1;
	e = calloc(1, sizeof(*e));
	if (!e || !(e->key = strdup(key))) {
		free(e);
		return 1;
	}
	e->t_ns = wall_ns();
	if (smuxfs_attrcache_get(fs, key, &info))
		snprintf(e->etag, sizeof(e->etag), "%s", info.etag);
	line = dq_line(e->key, e->t_ns, e->etag);
	if (!line) {
		free(e->key);
		free(e);
		return 1;
	}
	e->line_len = strlen(line);
	pthread_mutex_lock(&q->lock);
	/* backpressure: rm -r runs ahead of the server by DQ_MAX names */
	while (atomic_load(&q->n) >= DQ_MAX && !q->stop)
		pthread_cond_wait(&q->changed, &q->lock);
	/* unmounting, or queued already: the caller deletes */
	wrc = q->stop || dq_find(q, key) ? -EEXIST
	      : q->fd >= 0		 ? write_all(q->fd, line, e->line_len)
					 : 0;
	if (wrc && wrc != -EEXIST)
		smux_log(LOG_WARNING,
			 "%s: cannot journal the unlink of \"%s\" (%s): "
			 "deleted at once instead",
			 q->path, key, strerror(-wrc));
	/* no room in the set: the line stays, a replay of an absent key
	 * is none */
	if (wrc || !tsearch(e, &q->set, dq_cmp)) {
		rc = 1;
	} else {
		if (q->fd >= 0)
			q->journal_bytes += e->line_len;
		q->live_bytes += e->line_len;
		e->prev = q->tail;
		if (q->tail)
			q->tail->next = e;
		else
			q->head = e;
		q->tail = e;
		atomic_fetch_add(&q->n, 1);
		pthread_cond_signal(&q->wake);
		e = NULL;
	}
	pthread_mutex_unlock(&q->lock);
	free(line);
	if (e) {
		free(e->key);
		free(e);
	}
	return rc;
}

/* Whether an entry @key (exact, when not NULL) or under @prefix (when not
 * NULL; "" is everything) is queued (under lock). Its last error into
 * *@rc when it failed since @failures. */
static bool dq_pending(struct smuxfs_delq *q, const char *key,
		       const char *prefix, uint64_t failures, int *rc)
{
	bool any = false;
	size_t plen;

	*rc = 0;
	if (key) {
		struct dq_entry *e = dq_find(q, key);

		if (e && q->failures != failures && e->tries &&
		    e->state == DQ_QUEUED)
			*rc = e->last_rc;
		return e != NULL;
	}
	if (!prefix)
		prefix = "";
	plen = strlen(prefix);
	for (struct dq_entry *e = q->head; e; e = e->next) {
		if (strncmp(e->key, prefix, plen) != 0)
			continue;
		any = true;
		if (q->failures != failures && e->tries &&
		    e->state == DQ_QUEUED) {
			*rc = e->last_rc;
			break;
		}
	}
	return any;
}

int smuxfs_delq_wait(struct smuxfs *fs, const char *key, const char *prefix)
{
	struct smuxfs_delq *q = fs->delq;
	uint64_t failures;
	int rc = 0;

	if (!q || atomic_load(&q->n) == 0)
		return 0;
	pthread_mutex_lock(&q->lock);
	failures = q->failures;
	while (dq_pending(q, key, prefix, failures, &rc) && rc == 0) {
		pthread_cond_wait(&q->changed, &q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return rc < 0 ? rc : 0;
}

void smuxfs_delq_counts(struct smuxfs *fs, struct smuxfs_delq_counts *c)
{
	struct smuxfs_delq *q = fs->delq;

	memset(c, 0, sizeof(*c));
	if (!q)
		return;
	c->on = true;
	c->queued = atomic_load(&q->n);
	c->batches = atomic_load(&q->batches);
	c->deleted = atomic_load(&q->deleted);
	c->dropped = atomic_load(&q->dropped);
	c->retried = atomic_load(&q->retried);
}

/* ---- the journals of earlier runs ---- */

static int dq_is_journal(const struct dirent *d)
{
	size_t len = strlen(d->d_name), sl = strlen(DQ_SUFFIX);

	return strncmp(d->d_name, DQ_PREFIX, strlen(DQ_PREFIX)) == 0 &&
	       len > sl && strcmp(d->d_name + len - sl, DQ_SUFFIX) == 0;
}

/* What a record asks (0: deleted or nothing to do; 1: queued again in this
 * run; <0 an error, logged). */
static int dq_replay_one(struct smuxfs *fs, const char *path, int line,
			 const char *key, int64_t t_ns, const char *etag)
{
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	int rc;

	smuxfs_ctx(&ctx);
	rc = smux_backend_head(fs->root, &ctx, key, &info, &err);
	/* Absent where the head looked is not absent everywhere: on a mirror
	 * the crash may have fallen between the deletes of the key on its
	 * replicas, and the head reads one. The delete goes out anyway (a
	 * delete of an absent key succeeds) and reaches every replica. */
	if (rc == -ENOENT)
		rc = 0;
	else if (rc == 0 && S_ISDIR(info.mode))
		return 0; /* a directory now: not what was unlinked */
	else if (rc == 0 && (etag[0] ? strcmp(etag, info.etag) != 0
				     : info.mtime_ns > t_ns)) {
		smux_log(LOG_NOTICE,
			 "%s:%d: \"%s\" was unlinked before a crash but "
			 "has changed since (another client wrote it): "
			 "kept",
			 path, line, key);
		return 0;
	}
	if (rc == 0)
		rc = smux_backend_del(fs->root, &ctx, key, &err);
	if (rc == 0) {
		smux_log(LOG_WARNING,
			 "\"%s\": unlinked before a crash, deleted now (%s)",
			 key, path);
		return 0;
	}
	/* the store is not there: this run sends it, the name hidden */
	if (smuxfs_delq_add(fs, key) == 0)
		return 1;
	smux_log(LOG_ERR, "%s:%d: \"%s\": %s (the record stays)", path, line,
		 key, strerror(-rc));
	return rc;
}

/* Replays the journal @path; 0 when it may go. */
static int dq_replay(struct smuxfs *fs, const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0;
	int line = 0, left = 0;

	if (!f)
		return -errno;
	if (flock(fileno(f), LOCK_EX | LOCK_NB) != 0) {
		fclose(f); /* a live mount's */
		return -EBUSY;
	}
	while (getline(&buf, &cap, f) > 0) {
		const char *key = NULL, *etag = "";
		json_int_t t = 0;
		struct smux_error err;
		json_error_t jerr;
		json_t *j;

		line++;
		j = json_loads(buf, 0, &jerr);
		if (!j ||
		    json_unpack(j, "{s:s, s:I, s?s}", "key", &key, "t", &t,
				"etag", &etag) != 0 ||
		    smux_key_check(key, 0, "delete queue", &err) != 0) {
			/* a torn last line (the crash) or not a record */
			smux_log(LOG_ERR, "%s:%d: not a delete record: ignored",
				 path, line);
			json_decref(j);
			continue;
		}
		if (dq_replay_one(fs, path, line, key, (int64_t)t, etag) < 0)
			left++;
		json_decref(j);
	}
	free(buf);
	fclose(f);
	return left ? -EAGAIN : 0;
}

static void dq_recover(struct smuxfs *fs, struct smuxfs_delq *q,
		       const char *dir)
{
	struct dirent **names;
	char path[PATH_MAX];
	int n;

	n = scandir(dir, &names, dq_is_journal, alphasort);
	if (n < 0)
		return;
	for (int i = 0; i < n; i++) {
		if (snprintf(path, sizeof(path), "%s/%s", dir,
			     names[i]->d_name) < (int)sizeof(path) &&
		    strcmp(path, q->path) != 0 && dq_replay(fs, path) == 0)
			unlink(path);
		free(names[i]);
	}
	free(names);
}

/* ---- start, stop ---- */

int smuxfs_delq_start(struct smuxfs *fs)
{
	const struct smux_fs_opts *o = fs->opts;
	unsigned caps = smux_backend_caps(fs->root);
	const char *dir = o->state_dir;
	struct smuxfs_delq *q;

	fs->delq = NULL;
	if (o->delete_batch == SMUX_FS_OFF || fs->has_file || fs->ro ||
	    (o->delete_batch == SMUX_FS_AUTO && !(caps & SMUX_CAP_DEL_MANY)))
		return 0;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->fs = fs;
	q->fd = -1;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->wake, NULL);
	pthread_cond_init(&q->changed, NULL);
	if (dir && snprintf(q->path, sizeof(q->path),
			    "%s/" DQ_PREFIX "%020lld" DQ_SUFFIX, dir,
			    (long long)fs->mount_ns) < (int)sizeof(q->path)) {
		q->fd = open(q->path,
			     O_WRONLY | O_CREAT | O_TRUNC | O_APPEND |
				     O_CLOEXEC,
			     0600);
		if (q->fd >= 0 && flock(q->fd, LOCK_EX | LOCK_NB) != 0) {
			close(q->fd);
			q->fd = -1;
		}
		if (q->fd < 0)
			smux_log(LOG_WARNING,
				 "%s: %s: unlinks not journaled (a crash "
				 "may undo the last ones)",
				 q->path, strerror(errno));
	}
	fs->delq = q;
	if (pthread_create(&q->thread, NULL, dq_thread, q) != 0) {
		smuxfs_delq_stop(fs);
		return -EAGAIN;
	}
	q->started = true;
	if (dir)
		dq_recover(fs, q, dir);
	smux_log(LOG_INFO, "unlinks queued and deleted in batches%s",
		 q->fd >= 0 ? "" : " (no journal)");
	return 0;
}

void smuxfs_delq_stop(struct smuxfs *fs)
{
	struct smuxfs_delq *q = fs->delq;
	bool left;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	for (struct dq_entry *e = q->head; e; e = e->next)
		e->retry_at = 0; /* one more try each, failed ones too */
	/* what is due goes out first: the thread stops once nothing is */
	pthread_cond_broadcast(&q->wake);
	pthread_cond_broadcast(&q->changed);
	pthread_mutex_unlock(&q->lock);
	if (q->started)
		pthread_join(q->thread, NULL);
	q->started = false;
	left = q->head != NULL;
	if (left)
		smux_log(LOG_ERR,
			 "%zu unlink(s) not deleted from the store at "
			 "unmount; %s names them for the next mount",
			 atomic_load(&q->n),
			 q->fd >= 0 ? q->path : "(no journal: lost)");
	while (q->head)
		dq_unlink_entry(q, q->head);
	if (q->fd >= 0) {
		close(q->fd);
		if (!left)
			unlink(q->path);
	}
	fs->delq = NULL;
	pthread_cond_destroy(&q->wake);
	pthread_cond_destroy(&q->changed);
	pthread_mutex_destroy(&q->lock);
	free(q);
}
