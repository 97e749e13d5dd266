/* SPDX-License-Identifier: MIT */
/*
 * hints_journal.c - the file of the hint journal (core/hints.h,
 * hints_internal.h): its records, loading, group commit of appends and
 * compaction off the locks.
 *
 * Owns: the journal file <state_dir>/<mux>.hints (and its ".tmp" sibling
 * during a compaction). The index (hints.c) and the notes (hints_notes.c)
 * build records and apply changes; this file writes them, loads them
 * (hint, note and done records; a journal from before notes has none) and
 * keeps the pending hints and the standing notes through a compaction.
 *
 * The file is the durability point: a change is applied to the index only
 * after its record is written and fdatasync'ed. A failed append is cut off
 * again (ftruncate back to the last good record) so that later appends
 * stay well-formed. One flock keeps a second opener (another daemon with
 * the same mux name) from interleaving records.
 *
 * Compaction runs on a thread of its own: under the index lock (read) it
 * copies the pending hints and starts capturing every record queued from
 * then on (and those queued earlier but not applied yet); without a lock it
 * writes the copy to the ".tmp" file and fsyncs it; then, as the leader of
 * the queue (so no batch is being written), it writes what was captured,
 * fsyncs, renames the file over the journal and fsyncs the directory.
 * Adds, dones and reads go on while it builds the file; only batches that
 * reach the queue during that last step wait for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/hints_internal.h"
#include "core/jbytes.h"

#define HINTS_SUFFIX ".hints"
/* How often (every 100 ms) open retries a journal locked by another
 * process before giving up: 5 s. */
#define HINTS_LOCK_TRIES 50

/* Compaction: done records outnumber pending hints and the file has more
 * records than this (hints.h), not counting those written without a
 * sync - or more than HINTS_COMPACT_LAZY_LINES of those. A compaction
 * syncs the new file and its directory: every 64 records, as for hints
 * (each paid a sync already), it made a rename loop on a mirror a third
 * slower (two unsynced records per rename, mux_change.c). */
#define HINTS_COMPACT_MIN_LINES	 64
#define HINTS_COMPACT_LAZY_LINES 8192
/* Compaction writes the new file in chunks of about this size. */
#define HINTS_CHUNK ((size_t)64 * 1024)

void (*smux__hints_compact_hook)(struct smux__hints *h);

static int journal_error(struct smux_error *err, const char *path,
			 const char *what, int sys_errno)
{
	char buf[128];

	return smux_error_set(err, SMUX_E_HINT_JOURNAL_FAILED, NULL,
			      "%s: %s: %s", path, what,
			      strerror_r(sys_errno, buf, sizeof(buf)));
}

static int no_memory(struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_NO_MEMORY, NULL,
			      "hint journal: out of memory");
}

/* ---- records ---- */

static int jbuf_add(struct jbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

/* Appends @o as one compact line; consumes the reference to @o. */
static int jbuf_add_record(struct jbuf *b, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	int rc = -ENOMEM;

	if (s && jbuf_add(b, s, strlen(s)) == 0 && jbuf_add(b, "\n", 1) == 0)
		rc = 0;
	free(s);
	json_decref(o);
	return rc;
}

static const char *kind_name(enum smux__hint_kind kind)
{
	return kind == SMUX__HINT_DEL	   ? "del"
	       : kind == SMUX__HINT_INTENT ? "intent"
					   : "put";
}

/* The hint record of @e (what a snapshot or the index holds). */
static json_t *hint_record(const struct smux__hint *e)
{
	json_t *o = json_object();
	int bad = 0;

	if (!o)
		return NULL;
	bad |= json_object_set_new(o, "op", json_string("hint"));
	bad |= json_object_set_new(o, "id", json_integer((json_int_t)e->id));
	bad |= smux__jbytes_set(o, "replica", e->replica);
	bad |= smux__jbytes_set(o, "key", e->key);
	bad |= json_object_set_new(o, "kind", json_string(kind_name(e->kind)));
	bad |= json_object_set_new(o, "at", json_integer(e->at_ms));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static const char *note_name(enum smux__note_type type)
{
	switch (type) {
	case SMUX__NOTE_DEPARTED:
		return "departed";
	case SMUX__NOTE_CHANGE:
		return "change";
	case SMUX__NOTE_FRESH:
		break;
	}
	return "fresh";
}

/* The note record of @n (core/hints.h). */
static json_t *note_record(const struct smux__note *n)
{
	json_t *o = json_object();
	int bad = 0;

	if (!o)
		return NULL;
	bad |= json_object_set_new(o, "op", json_string("note"));
	bad |= json_object_set_new(o, "id", json_integer((json_int_t)n->id));
	bad |= json_object_set_new(o, "note", json_string(note_name(n->type)));
	bad |= smux__jbytes_set(o, "replica", n->replica);
	bad |= smux__jbytes_set(o, "key", n->key);
	if (n->to)
		bad |= smux__jbytes_set(o, "to", n->to);
	if (n->link)
		bad |= json_object_set_new(o, "link", json_true());
	bad |= json_object_set_new(o, "kind", json_string(kind_name(n->kind)));
	bad |= json_object_set_new(o, "hint",
				   json_integer((json_int_t)n->hint));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *done_record(uint64_t id)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (json_object_set_new(o, "op", json_string("done")) ||
	    json_object_set_new(o, "id", json_integer((json_int_t)id))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int get_id(json_t *o, uint64_t *id, char *why, size_t whylen)
{
	json_t *v = json_object_get(o, "id");

	if (!json_is_integer(v) || json_integer_value(v) < 1) {
		snprintf(why, whylen, "missing or bad \"id\"");
		return -EINVAL;
	}
	*id = (uint64_t)json_integer_value(v);
	return 0;
}

/* The kind named by @o's "kind" (intent only when @intent), or -EINVAL
 * with @why set. */
static int get_kind(json_t *o, bool intent, enum smux__hint_kind *k, char *why,
		    size_t whylen)
{
	const char *kind = json_string_value(json_object_get(o, "kind"));

	if (kind && strcmp(kind, "put") == 0) {
		*k = SMUX__HINT_PUT;
	} else if (kind && strcmp(kind, "del") == 0) {
		*k = SMUX__HINT_DEL;
	} else if (intent && kind && strcmp(kind, "intent") == 0) {
		*k = SMUX__HINT_INTENT;
	} else {
		snprintf(why, whylen, "missing or bad \"kind\"");
		return -EINVAL;
	}
	return 0;
}

/* The id of a new record, or -EINVAL when a hint or note has it. */
static int get_new_id(struct smux__hints *h, json_t *o, uint64_t *id, char *why,
		      size_t whylen)
{
	int rc = get_id(o, id, why, whylen);

	if (rc == 0 && (hx_find_id(h, *id) || hn_find(h, *id))) {
		snprintf(why, whylen, "duplicate id %llu",
			 (unsigned long long)*id);
		rc = -EINVAL;
	}
	return rc;
}

/* Applies a loaded note record (hints_notes.c). */
static int load_note(struct smux__hints *h, json_t *o, char *why, size_t whylen)
{
	const char *type = json_string_value(json_object_get(o, "note"));
	json_t *hint = json_object_get(o, "hint");
	struct smux__note n = {0};
	struct note_entry *e;
	int rc;

	rc = get_new_id(h, o, &n.id, why, whylen);
	if (rc)
		return rc;
	if (type && strcmp(type, "fresh") == 0) {
		n.type = SMUX__NOTE_FRESH;
	} else if (type && strcmp(type, "departed") == 0) {
		n.type = SMUX__NOTE_DEPARTED;
	} else if (type && strcmp(type, "change") == 0) {
		n.type = SMUX__NOTE_CHANGE;
	} else {
		snprintf(why, whylen, "missing or bad \"note\"");
		return -EINVAL;
	}
	/* intent: a change note of a key changed in place (hn_valid) */
	rc = get_kind(o, n.type == SMUX__NOTE_CHANGE, &n.kind, why, whylen);
	if (rc)
		return rc;
	if (!json_is_integer(hint) || json_integer_value(hint) < 0) {
		snprintf(why, whylen, "missing or bad \"hint\"");
		return -EINVAL;
	}
	n.hint = (uint64_t)json_integer_value(hint);
	rc = smux__jbytes_get(o, "replica", &n.replica, why, whylen);
	if (rc == 0)
		rc = smux__jbytes_get(o, "key", &n.key, why, whylen);
	/* a rename's new name (a change); the others have none */
	if (rc == 0 && n.type == SMUX__NOTE_CHANGE && n.kind == SMUX__HINT_PUT)
		rc = smux__jbytes_get(o, "to", &n.to, why, whylen);
	if (rc == 0 &&
	    (json_object_get(o, "to") || json_object_get(o, "to_hex")) &&
	    !n.to) {
		snprintf(why, whylen, "\"to\" in a note that has none");
		rc = -EINVAL;
	}
	n.link = json_is_true(json_object_get(o, "link"));
	if (rc == 0 && !hn_valid(&n)) {
		snprintf(why, whylen, "bad \"%s\" note", type);
		rc = -EINVAL;
	}
	e = rc == 0 ? hn_new(&n) : NULL;
	if (rc == 0 && !e)
		rc = -ENOMEM;
	if (e) {
		hn_link(h, e);
		if (n.id >= h->next_id)
			h->next_id = n.id + 1;
	}
	free(n.replica);
	free(n.key);
	free(n.to);
	return rc;
}

/* Applies a loaded hint record. */
static int load_hint(struct smux__hints *h, json_t *o, char *why, size_t whylen)
{
	json_t *at = json_object_get(o, "at");
	char *replica = NULL, *key = NULL;
	struct hint_replica *rep;
	struct hint_entry *e, *old;
	enum smux__hint_kind k;
	uint64_t id;
	int rc;

	rc = get_new_id(h, o, &id, why, whylen);
	if (rc == 0)
		rc = get_kind(o, true, &k, why, whylen);
	if (rc)
		return rc;
	if (!json_is_integer(at)) {
		snprintf(why, whylen, "missing or bad \"at\"");
		return -EINVAL;
	}
	rc = smux__jbytes_get(o, "replica", &replica, why, whylen);
	if (rc)
		goto out;
	rc = smux__jbytes_get(o, "key", &key, why, whylen);
	if (rc)
		goto out;
	rc = -ENOMEM;
	rep = hx_get_replica(h, replica);
	if (!rep)
		goto out;
	e = hx_entry_new(rep, key, id, k, (int64_t)json_integer_value(at));
	if (!e)
		goto out;
	/* A crash between a replacing hint and the done record of the hint
	 * it replaces leaves both; the later one wins, as in add. */
	old = hx_find_rk(h, rep, key);
	if (old && old->id < id) {
		hx_entry_unlink(h, old);
	} else if (old) {
		hx_entry_free(e);
		e = NULL;
	}
	if (e)
		hx_entry_link(h, e);
	if (id >= h->next_id)
		h->next_id = id + 1;
	rc = 0;
out:
	free(replica);
	free(key);
	return rc;
}

/*
 * Applies one record (@len bytes, no newline). Returns 0, 1 when the line
 * is not JSON at all (a torn last line is tolerated by the caller),
 * -EINVAL with @why set, or -ENOMEM.
 */
static int load_record(struct smux__hints *h, const char *line, size_t len,
		       char *why, size_t whylen)
{
	json_error_t jerr;
	json_t *o = json_loadb(line, len, 0, &jerr);
	const char *op;
	uint64_t id;
	int rc;

	if (!o) {
		snprintf(why, whylen, "not JSON: %s", jerr.text);
		return 1;
	}
	op = json_string_value(json_object_get(o, "op"));
	if (!json_is_object(o) || !op) {
		snprintf(why, whylen, "not a journal record (no \"op\")");
		rc = -EINVAL;
	} else if (strcmp(op, "hint") == 0) {
		rc = load_hint(h, o, why, whylen);
	} else if (strcmp(op, "note") == 0) {
		rc = load_note(h, o, why, whylen);
	} else if (strcmp(op, "done") == 0) {
		rc = get_id(o, &id, why, whylen);
		if (rc == 0) {
			struct hint_entry *e = hx_find_id(h, id);
			struct note_entry *ne = e ? NULL : hn_find(h, id);

			if (e)
				hx_entry_unlink(h, e);
			if (ne)
				hn_unlink(h, ne);
			if (id >= h->next_id)
				h->next_id = id + 1;
			h->done_lines++;
		}
	} else {
		snprintf(why, whylen, "unknown op \"%.40s\"", op);
		rc = -EINVAL;
	}
	json_decref(o);
	return rc;
}

/* ---- the file ---- */

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* mkdir -p @dir (0700 for what it creates), syncing each new entry. */
static int make_dirs(const char *dir, struct smux_error *err)
{
	char *p = strdup(dir);
	int rc = 0;

	if (!p)
		return no_memory(err);
	for (char *s = p + 1;; s++) {
		char c = *s;

		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) == 0) {
			char *slash = strrchr(p, '/');

			if (slash && slash != p) {
				*slash = '\0';
				fsync_dir(p); /* best effort; see open */
				*slash = '/';
			}
		} else if (errno != EEXIST) {
			rc = journal_error(err, p, "mkdir", errno);
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return rc;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Appends @len bytes holding @nlines records (of which @ndone are done
 * records) and syncs them. On failure nothing is counted and the file is
 * cut back to its last good record (now, or before the next append).
 */
/* ---- building records (under the index lock) ---- */

int hj_add_hint(struct jbuf *b, const struct hint_entry *e)
{
	struct smux__hint rec = {.id = e->id,
				 .kind = e->kind,
				 .at_ms = e->at_ms,
				 .replica = e->rep->name,
				 .key = e->key};

	return jbuf_add_record(b, hint_record(&rec));
}

int hj_add_done(struct jbuf *b, uint64_t id)
{
	return jbuf_add_record(b, done_record(id));
}

int hj_add_note(struct jbuf *b, const struct smux__note *n)
{
	return jbuf_add_record(b, note_record(n));
}

/* ---- group commit ---- */

/*
 * Appends batch @b to the file and syncs it when it asks for it; the
 * caller is the leader (h->syncing), holding no lock. On failure nothing
 * is counted and the file is cut back to its last good record (now, or
 * before the next append); *@what and *@wpath say which step failed.
 */
static int append_batch(struct smux__hints *h, const struct hints_batch *b,
			const char **what, const char **wpath)
{
	int rc;

	*wpath = h->path;
	if (h->trunc_pending) {
		*what = "truncate";
		if (ftruncate(h->fd, h->size) != 0)
			return -errno;
		h->trunc_pending = false;
	}
	if (h->dir_dirty) {
		*what = "fsync";
		*wpath = h->dir;
		rc = fsync_dir(h->dir);
		if (rc)
			return rc;
		h->dir_dirty = false;
		*wpath = h->path;
	}
	/* One write(2) in practice; O_APPEND puts it at the end. */
	*what = "write";
	rc = write_all(h->fd, b->buf.p, b->buf.len);
	if (rc == 0 && b->sync) {
		*what = "fdatasync";
		if (fdatasync(h->fd) != 0)
			rc = -errno;
	}
	if (rc) {
		if (ftruncate(h->fd, h->size) != 0)
			h->trunc_pending = true;
		else
			(void)fdatasync(h->fd);
		return rc;
	}
	h->size += (off_t)b->buf.len;
	return 0;
}

/*
 * Writes the open batch as the leader: takes it, writes it without jlock,
 * marks it done. Caller holds jlock and has set h->syncing; returns with
 * jlock held (the caller clears syncing and wakes the waiters).
 */
static void lead_one(struct smux__hints *h)
{
	struct hints_batch *b = h->open;

	h->open = NULL;
	pthread_mutex_unlock(&h->jlock);
	b->rc = append_batch(h, b, &b->what, &b->wpath);
	pthread_mutex_lock(&h->jlock);
	if (b->rc == 0) {
		h->lines += b->lines;
		if (!b->sync)
			h->lazy_lines += b->lines;
		h->done_lines += b->ndone;
	}
	b->done = true;
}

int hj_queue(struct smux__hints *h, struct hints_op *op, bool sync)
{
	struct hints_batch *b;
	int rc = -ENOMEM;

	op->batch = NULL;
	if (!h->path)
		return 0; /* in memory: nothing to wait for */
	pthread_mutex_lock(&h->jlock);
	if (!h->open)
		h->open = calloc(1, sizeof(*h->open));
	b = h->open;
	if (!b || jbuf_add(&b->buf, op->rec->p, op->rec->len) != 0)
		goto out_unlock;
	if (h->capturing) {
		if (jbuf_add(&h->capture, op->rec->p, op->rec->len) != 0)
			h->capture_failed = true;
		h->cap_lines += op->lines;
		h->cap_done += op->ndone;
	}
	b->lines += op->lines;
	b->ndone += op->ndone;
	b->sync |= sync;
	b->refs++;
	op->batch = b;
	rc = 0;
out_unlock:
	pthread_mutex_unlock(&h->jlock);
	if (rc == 0) {
		op->prev = NULL;
		op->next = h->inflight;
		if (op->next)
			op->next->prev = op;
		h->inflight = op;
	}
	return rc;
}

int hj_wait(struct smux__hints *h, struct hints_op *op, struct smux_error *err)
{
	struct hints_batch *b = op->batch;
	const char *what, *wpath;
	int rc;

	if (!b)
		return 0;
	pthread_mutex_lock(&h->jlock);
	while (!b->done) {
		/* Not done and no leader: it is the open batch. */
		if (!h->syncing) {
			h->syncing = true;
			lead_one(h);
			h->syncing = false;
			pthread_cond_broadcast(&h->jcond);
		} else {
			pthread_cond_wait(&h->jcond, &h->jlock);
		}
	}
	rc = b->rc;
	what = b->what;
	wpath = b->wpath;
	if (--b->refs == 0) {
		free(b->buf.p);
		free(b);
	}
	pthread_mutex_unlock(&h->jlock);
	if (rc)
		return journal_error(err, wpath, what, -rc);
	return 0;
}

void hj_retire(struct smux__hints *h, struct hints_op *op)
{
	if (!op->batch)
		return;
	if (op->prev)
		op->prev->next = op->next;
	else
		h->inflight = op->next;
	if (op->next)
		op->next->prev = op->prev;
	op->batch = NULL;
}

int hj_commit(struct smux__hints *h, const struct jbuf *b, unsigned long lines,
	      unsigned long ndone, bool sync, struct smux_error *err)
{
	struct hints_op op = {.rec = b, .lines = lines, .ndone = ndone};
	int rc;

	if (hj_queue(h, &op, sync) != 0)
		return no_memory(err);
	pthread_rwlock_unlock(&h->lock);
	rc = hj_wait(h, &op, err);
	pthread_rwlock_wrlock(&h->lock);
	hj_retire(h, &op);
	return rc;
}

/* ---- compaction ---- */

struct compaction {
	struct smux__hints *h;
	struct smux__hint *list; /* the snapshot */
	int n;
	struct smux__note *notes; /* and of the standing notes */
	int nnotes;
	/* the last id given out before the snapshot, kept by a done record
	 * when no pending record has it (mark) */
	uint64_t last_id;
	bool mark;
};

/* Writes the snapshot to the ".tmp" file and syncs it; the new file's fd
 * (flocked) and *@size, or -1. */
static int compact_build(struct smux__hints *h, const struct compaction *c,
			 off_t *size)
{
	struct jbuf b = {0};
	int fd;

	*size = 0;
	fd = open(h->tmp_path,
		  O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	/* Locked before it takes the journal's name, as the old one is. */
	if (flock(fd, LOCK_EX | LOCK_NB) != 0)
		goto out_unlink;
	for (int i = 0; i < c->n + c->nnotes; i++) {
		json_t *o = i < c->n ? hint_record(&c->list[i])
				     : note_record(&c->notes[i - c->n]);

		if (jbuf_add_record(&b, o) != 0)
			goto out_unlink;
		if (b.len >= HINTS_CHUNK) {
			if (write_all(fd, b.p, b.len) != 0)
				goto out_unlink;
			*size += (off_t)b.len;
			b.len = 0;
		}
	}
	/* ids go on from the last one given out after a reopen, also when
	 * its record was done and dropped here (a done record of an id no
	 * record has is read as that: loading takes next_id from it) */
	if (c->mark && hj_add_done(&b, c->last_id) != 0)
		goto out_unlink;
	if (b.len) {
		if (write_all(fd, b.p, b.len) != 0)
			goto out_unlink;
		*size += (off_t)b.len;
	}
	if (fsync(fd) != 0)
		goto out_unlink;
	free(b.p);
	return fd;

out_unlink:
	close(fd);
	unlink(h->tmp_path);
	free(b.p);
	return -1;
}

/*
 * Rewrites the file with the pending hints only (hints.h); a failure
 * leaves the (valid) long file in place and is retried after the next
 * record. Runs on the compaction thread (or in open), holding no lock.
 */
static void compact_run(struct compaction *c)
{
	struct smux__hints *h = c->h;
	struct jbuf cap = {0};
	unsigned long cap_lines = 0, cap_done = 0;
	bool ok = false, dir_dirty = false;
	off_t size = 0;
	int fd;

	if (smux__hints_compact_hook)
		smux__hints_compact_hook(h);
	fd = compact_build(h, c, &size);

	/* The swap: as the leader, so that no batch is being written. */
	pthread_mutex_lock(&h->jlock);
	while (h->syncing)
		pthread_cond_wait(&h->jcond, &h->jlock);
	h->syncing = true;
	/* what was queued before now goes to the old file (and is in the
	 * capture); what is queued from now on goes to the new one */
	while (h->open) {
		lead_one(h);
		pthread_cond_broadcast(&h->jcond);
	}
	h->capturing = false;
	cap = h->capture;
	cap_lines = h->cap_lines;
	cap_done = h->cap_done;
	memset(&h->capture, 0, sizeof(h->capture));
	if (h->capture_failed && fd >= 0) {
		close(fd);
		unlink(h->tmp_path);
		fd = -1;
	}
	h->capture_failed = false;
	pthread_mutex_unlock(&h->jlock);

	if (fd >= 0 && write_all(fd, cap.p, cap.len) == 0 &&
	    fdatasync(fd) == 0 && rename(h->tmp_path, h->path) == 0) {
		ok = true;
		size += (off_t)cap.len;
		/* until the new name is durable, no append may succeed
		 * (append_batch retries the sync) */
		dir_dirty = fsync_dir(h->dir) != 0;
	} else if (fd >= 0) {
		close(fd);
		unlink(h->tmp_path);
	}
	free(cap.p);

	pthread_mutex_lock(&h->jlock);
	if (ok) {
		close(h->fd);
		h->fd = fd;
		h->size = size;
		h->trunc_pending = false;
		h->dir_dirty = dir_dirty;
		h->lines = (unsigned long)c->n + (unsigned long)c->nnotes +
			   c->mark + cap_lines;
		h->done_lines = c->mark + cap_done;
		h->lazy_lines = 0;
	}
	h->syncing = false;
	h->compacting = false;
	pthread_cond_broadcast(&h->jcond);
	pthread_mutex_unlock(&h->jlock);
	smux__hints_free_list(c->list, c->n);
	smux__hints_free_notes(c->notes, c->nnotes);
	free(c);
}

static void *compact_main(void *arg)
{
	compact_run(arg);
	return NULL;
}

void hj_maybe_compact(struct smux__hints *h, bool now)
{
	struct compaction *c;
	bool due;

	if (!h->path)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->h = h;
	pthread_rwlock_rdlock(&h->lock);
	pthread_mutex_lock(&h->jlock);
	due = !h->compacting &&
	      (h->lines - h->lazy_lines > HINTS_COMPACT_MIN_LINES ||
	       h->lazy_lines > HINTS_COMPACT_LAZY_LINES) &&
	      h->done_lines > h->npending + h->nnotes;
	if (due && h->compactor_joinable) {
		/* the last one is over (compacting is false): reap it */
		pthread_join(h->compactor, NULL);
		h->compactor_joinable = false;
	}
	if (due) {
		/* From here on, every queued record is also captured, and so
		 * is every record queued earlier and not applied yet (the
		 * snapshot below does not have it). */
		h->compacting = true;
		h->capturing = true;
		h->capture.len = 0;
		h->cap_lines = h->cap_done = 0;
		for (struct hints_op *op = h->inflight; op; op = op->next) {
			if (jbuf_add(&h->capture, op->rec->p, op->rec->len))
				h->capture_failed = true;
			h->cap_lines += op->lines;
			h->cap_done += op->ndone;
		}
	}
	pthread_mutex_unlock(&h->jlock);
	if (due) {
		c->n = hx_snapshot(h, NULL, &c->list);
		c->nnotes = c->n < 0 ? -ENOMEM : hn_snapshot(h, &c->notes);
		c->last_id = h->next_id - 1;
		c->mark = c->last_id > 0;
		for (int i = 0; i < c->n && c->mark; i++)
			c->mark = c->list[i].id != c->last_id;
		for (int i = 0; i < c->nnotes && c->mark; i++)
			c->mark = c->notes[i].id != c->last_id;
		if (c->n < 0 || c->nnotes < 0) {
			smux__hints_free_list(c->list, c->n);
			c->list = NULL;
			c->n = 0;
			c->nnotes = 0;
			pthread_mutex_lock(&h->jlock);
			h->capture_failed = true;
			pthread_mutex_unlock(&h->jlock);
		}
	}
	pthread_rwlock_unlock(&h->lock);
	if (!due) {
		free(c);
		return;
	}
	if (!now) {
		/* under jlock: a compaction that ends at once cannot be
		 * reaped before it is known to be joinable */
		pthread_mutex_lock(&h->jlock);
		h->compactor_joinable = pthread_create(&h->compactor, NULL,
						       compact_main, c) == 0;
		now = !h->compactor_joinable;
		pthread_mutex_unlock(&h->jlock);
	}
	if (now)
		compact_run(c);
}

void hj_quiesce(struct smux__hints *h)
{
	bool join;

	if (!h->path)
		return;
	pthread_mutex_lock(&h->jlock);
	while (h->compacting)
		pthread_cond_wait(&h->jcond, &h->jlock);
	join = h->compactor_joinable;
	h->compactor_joinable = false;
	pthread_mutex_unlock(&h->jlock);
	if (join)
		pthread_join(h->compactor, NULL);
}

/* ---- opening and loading ---- */

/*
 * Replays the file into memory. A torn last line (no newline, or not
 * JSON) is cut off; any other bad line is an error "path:line: reason".
 */
static int journal_load(struct smux__hints *h, struct smux_error *err)
{
	unsigned long lineno = 0, torn_line = 0;
	char why[200] = "";
	char *line = NULL;
	size_t cap = 0;
	off_t good = 0;
	ssize_t n;
	FILE *f;
	int fd, rc = 0;

	fd = open(h->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return journal_error(err, h->path, "open", errno);
	f = fdopen(fd, "r");
	if (!f) {
		rc = journal_error(err, h->path, "fdopen", errno);
		close(fd);
		return rc;
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		lineno++;
		if (torn_line)
			break; /* the bad line was not the last one */
		if (line[n - 1] != '\n') {
			snprintf(why, sizeof(why), "no newline");
			torn_line = lineno;
			continue;
		}
		rc = load_record(h, line, (size_t)n - 1, why, sizeof(why));
		if (rc == 1) {
			torn_line = lineno;
			rc = 0;
			continue;
		}
		if (rc == -ENOMEM) {
			rc = no_memory(err);
			goto out;
		}
		if (rc) {
			rc = smux_error_set(err, SMUX_E_HINT_JOURNAL_FAILED,
					    NULL, "%s:%lu: %s", h->path, lineno,
					    why);
			goto out;
		}
		h->lines++;
		good += n;
	}
	if (torn_line && torn_line != lineno) {
		rc = smux_error_set(err, SMUX_E_HINT_JOURNAL_FAILED, NULL,
				    "%s:%lu: %s", h->path, torn_line, why);
		goto out;
	}
	if (ferror(f) || !feof(f)) { /* getline also stops on ENOMEM */
		rc = journal_error(err, h->path, "read", errno);
		goto out;
	}
	if (torn_line) {
		/* A crash mid-append: drop it so that appends stay lines. */
		if (ftruncate(h->fd, good) != 0 || fdatasync(h->fd) != 0) {
			rc = journal_error(err, h->path, "truncate torn line",
					   errno);
			goto out;
		}
	}
	h->size = good;
out:
	free(line);
	fclose(f);
	return rc;
}

/* A mux name is a plain file name: [A-Za-z0-9._-]+, not starting '.'. */
int hj_open(struct smux__hints *h, const char *state_dir, const char *mux_name,
	    struct smux_error *err)
{
	size_t len = strlen(state_dir);
	const char *sep = "/";
	int rc;

	if (len == 0)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "hint journal: empty state directory");
	while (len > 1 && state_dir[len - 1] == '/')
		len--;
	if (state_dir[len - 1] == '/')
		sep = "";
	if (asprintf(&h->dir, "%.*s", (int)len, state_dir) < 0) {
		h->dir = NULL;
		return no_memory(err);
	}
	if (asprintf(&h->path, "%s%s%s" HINTS_SUFFIX, h->dir, sep, mux_name) <
	    0) {
		h->path = NULL;
		return no_memory(err);
	}
	if (asprintf(&h->tmp_path, "%s%s%s" HINTS_TMP_SUFFIX, h->dir, sep,
		     mux_name) < 0) {
		h->tmp_path = NULL;
		return no_memory(err);
	}
	rc = make_dirs(h->dir, err);
	if (rc)
		return rc;

	h->fd = open(h->path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (h->fd < 0)
		return journal_error(err, h->path, "open", errno);
	/* A daemon that was just unmounted may still be exiting (umount
	 * returns first): give it a few seconds to let go of the lock. */
	for (int tries = 0; flock(h->fd, LOCK_EX | LOCK_NB) != 0; tries++) {
		if (errno == EWOULDBLOCK && tries < HINTS_LOCK_TRIES) {
			struct timespec ts = {0, 100L * 1000 * 1000};

			nanosleep(&ts, NULL);
			continue;
		}
		if (errno == EWOULDBLOCK)
			return smux_error_set(err, SMUX_E_HINT_JOURNAL_FAILED,
					      NULL,
					      "%s: in use by another "
					      "process",
					      h->path);
		return journal_error(err, h->path, "flock", errno);
	}
	/* Left by a crash mid-compaction: the journal itself is whole. */
	if (unlink(h->tmp_path) != 0 && errno != ENOENT)
		return journal_error(err, h->tmp_path, "unlink", errno);
	/* The file's name must survive a crash as much as its records. */
	rc = fsync_dir(h->dir);
	if (rc)
		return journal_error(err, h->dir, "fsync", -rc);
	return journal_load(h, err);
}

void hj_close(struct smux__hints *h)
{
	hj_quiesce(h);
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	if (h->open) { /* no waiter is left at close */
		free(h->open->buf.p);
		free(h->open);
		h->open = NULL;
	}
	free(h->capture.p);
	memset(&h->capture, 0, sizeof(h->capture));
}
