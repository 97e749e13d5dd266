/* SPDX-License-Identifier: MIT */
/*
 * hints.c - the hinted-handoff journal of one mux (core/hints.h).
 *
 * Owns: the journal file <state_dir>/<mux>.hints (and its ".tmp" sibling
 * during a compaction) and the in-memory set of pending hints. Never calls
 * a backend and never replays a hint: the mux does, then reports back with
 * smux__hints_done() or smux__hints_supersede().
 *
 * Pending hints live in a list in id order (and in one list per replica),
 * and in two hash tables: by id (done) and by (replica, key) (add,
 * supersede, has). There is at most one pending hint per (replica, key).
 *
 * The file is the durability point: an operation changes memory only after
 * its record is written and fdatasync'ed. A failed append is cut off again
 * (ftruncate back to the last good record) so that later appends stay
 * well-formed. One flock keeps a second opener (another daemon with the
 * same mux name) from interleaving records.
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

#include "core/hints.h"

#define HINTS_SUFFIX	 ".hints"
#define HINTS_TMP_SUFFIX ".hints.tmp"
#define HINTS_BUCKETS0	 64
/* How often (every 100 ms) open retries a journal locked by another
 * process before giving up: 5 s. */
#define HINTS_LOCK_TRIES 50

/* Compaction: done records outnumber pending hints and the file has more
 * records than this (hints.h). */
#define HINTS_COMPACT_MIN_LINES 64
/* Compaction writes the new file in chunks of about this size. */
#define HINTS_CHUNK ((size_t)64 * 1024)

struct hint_entry;

/* A replica that has (or had) pending hints; lives until close. */
struct hint_replica {
	char *name;
	unsigned pending;
	struct hint_entry *head, *tail; /* its pending hints, id order */
	struct hint_replica *next;	/* h->replicas */
};

struct hint_entry {
	uint64_t id;
	enum smux__hint_kind kind;
	int64_t at_ms;
	char *key;
	struct hint_replica *rep;
	uint64_t rk_hash;
	struct hint_entry *prev, *next;	  /* all pending, id order */
	struct hint_entry *rprev, *rnext; /* pending of rep, id order */
	struct hint_entry *id_chain;	  /* h->by_id bucket */
	struct hint_entry *rk_chain;	  /* h->by_rk bucket */
};

struct smux__hints {
	pthread_mutex_t lock;
	/* Immutable after open; NULL in memory. */
	char *path;
	char *tmp_path;
	char *dir;

	/* Everything below: protected by lock. */
	int fd;		    /* the journal, O_APPEND, flocked; -1 in memory */
	off_t size;	    /* bytes of well-formed records in the file */
	bool trunc_pending; /* a failed append left bytes past size */
	bool dir_dirty;	    /* a compaction's rename awaits a dir fsync */
	uint64_t next_id;
	unsigned npending;
	unsigned long lines;	  /* records in the file */
	unsigned long done_lines; /* done records in the file */
	struct hint_entry *head, *tail;
	struct hint_replica *replicas;
	struct hint_entry **by_id, **by_rk;
	size_t nbuckets; /* of both tables; a power of two */
};

/* A growable byte buffer for records. */
struct jbuf {
	char *p;
	size_t len, cap;
};

static const char *hints_path_of(const struct smux__hints *h)
{
	return h->path ? h->path : "";
}

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

/* ---- hashing and the in-memory set ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static uint64_t rk_hash(const struct hint_replica *rep, const char *key)
{
	uint64_t x = 0xcbf29ce484222325ULL;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		x ^= *p;
		x *= 0x100000001b3ULL;
	}
	return mix64(x ^ (uint64_t)(uintptr_t)rep);
}

static size_t id_slot(const struct smux__hints *h, uint64_t id)
{
	return (size_t)(mix64(id) & (h->nbuckets - 1));
}

static size_t rk_slot(const struct smux__hints *h, uint64_t hash)
{
	return (size_t)(hash & (h->nbuckets - 1));
}

static void hash_insert(struct smux__hints *h, struct hint_entry *e)
{
	size_t i = id_slot(h, e->id);
	size_t j = rk_slot(h, e->rk_hash);

	e->id_chain = h->by_id[i];
	h->by_id[i] = e;
	e->rk_chain = h->by_rk[j];
	h->by_rk[j] = e;
}

/* Rebuilds both tables with @n buckets from the pending list. */
static int table_resize(struct smux__hints *h, size_t n)
{
	struct hint_entry **by_id = calloc(n, sizeof(struct hint_entry *));
	struct hint_entry **by_rk = calloc(n, sizeof(struct hint_entry *));

	if (!by_id || !by_rk) {
		free(by_id);
		free(by_rk);
		return -ENOMEM;
	}
	free(h->by_id);
	free(h->by_rk);
	h->by_id = by_id;
	h->by_rk = by_rk;
	h->nbuckets = n;
	for (struct hint_entry *e = h->head; e; e = e->next)
		hash_insert(h, e);
	return 0;
}

static struct hint_entry *find_id(const struct smux__hints *h, uint64_t id)
{
	struct hint_entry *e = h->by_id[id_slot(h, id)];

	while (e && e->id != id)
		e = e->id_chain;
	return e;
}

static struct hint_replica *find_replica(const struct smux__hints *h,
					 const char *name)
{
	struct hint_replica *r = h->replicas;

	while (r && strcmp(r->name, name) != 0)
		r = r->next;
	return r;
}

static struct hint_replica *get_replica(struct smux__hints *h, const char *name)
{
	struct hint_replica *r = find_replica(h, name);

	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->name = strdup(name);
	if (!r->name) {
		free(r);
		return NULL;
	}
	r->next = h->replicas;
	h->replicas = r;
	return r;
}

static struct hint_entry *find_rk(const struct smux__hints *h,
				  const struct hint_replica *rep,
				  const char *key)
{
	uint64_t hash;
	struct hint_entry *e;

	if (!rep)
		return NULL;
	hash = rk_hash(rep, key);
	for (e = h->by_rk[rk_slot(h, hash)]; e; e = e->rk_chain)
		if (e->rk_hash == hash && e->rep == rep &&
		    strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

static struct hint_entry *entry_new(struct hint_replica *rep, const char *key,
				    uint64_t id, enum smux__hint_kind kind,
				    int64_t at_ms)
{
	struct hint_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->key = strdup(key);
	if (!e->key) {
		free(e);
		return NULL;
	}
	e->id = id;
	e->kind = kind;
	e->at_ms = at_ms;
	e->rep = rep;
	e->rk_hash = rk_hash(rep, key);
	return e;
}

static void entry_free(struct hint_entry *e)
{
	if (e) {
		free(e->key);
		free(e);
	}
}

/*
 * Adds @e to the pending set, keeping id order (appends at the tail in
 * practice: ids only grow). Cannot fail: a table that cannot grow stays
 * as it is, only slower.
 */
static void entry_link(struct smux__hints *h, struct hint_entry *e)
{
	struct hint_replica *r = e->rep;
	struct hint_entry *p = h->tail;

	while (p && p->id > e->id)
		p = p->prev;
	e->prev = p;
	e->next = p ? p->next : h->head;
	if (e->next)
		e->next->prev = e;
	else
		h->tail = e;
	if (p)
		p->next = e;
	else
		h->head = e;

	p = r->tail;
	while (p && p->id > e->id)
		p = p->rprev;
	e->rprev = p;
	e->rnext = p ? p->rnext : r->head;
	if (e->rnext)
		e->rnext->rprev = e;
	else
		r->tail = e;
	if (p)
		p->rnext = e;
	else
		r->head = e;

	h->npending++;
	r->pending++;
	if (h->npending > h->nbuckets && table_resize(h, h->nbuckets * 2) == 0)
		return; /* the rehash inserted e */
	hash_insert(h, e);
}

/* Removes @e from the pending set and frees it. */
static void entry_unlink(struct smux__hints *h, struct hint_entry *e)
{
	struct hint_replica *r = e->rep;
	struct hint_entry **pp;

	if (e->prev)
		e->prev->next = e->next;
	else
		h->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		h->tail = e->prev;
	if (e->rprev)
		e->rprev->rnext = e->rnext;
	else
		r->head = e->rnext;
	if (e->rnext)
		e->rnext->rprev = e->rprev;
	else
		r->tail = e->rprev;

	for (pp = &h->by_id[id_slot(h, e->id)]; *pp != e; pp = &(*pp)->id_chain)
		;
	*pp = e->id_chain;
	for (pp = &h->by_rk[rk_slot(h, e->rk_hash)]; *pp != e;
	     pp = &(*pp)->rk_chain)
		;
	*pp = e->rk_chain;

	h->npending--;
	r->pending--;
	entry_free(e);
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

/*
 * Sets @name to the string @s, or "<name>_hex" to its bytes in hex when @s
 * is not valid UTF-8 (which JSON strings must be).
 */
static int set_bytes(json_t *o, const char *name, const char *s)
{
	static const char digits[] = "0123456789abcdef";
	json_t *v = json_string(s);
	char hexname[32];
	size_t n;
	char *hex;

	if (v)
		return json_object_set_new(o, name, v);
	n = strlen(s);
	hex = malloc(2 * n + 1);
	if (!hex)
		return -1;
	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[(unsigned char)s[i] >> 4];
		hex[2 * i + 1] = digits[(unsigned char)s[i] & 15];
	}
	hex[2 * n] = '\0';
	snprintf(hexname, sizeof(hexname), "%s_hex", name);
	v = json_string(hex);
	free(hex);
	return json_object_set_new(o, hexname, v);
}

static json_t *hint_record(const struct hint_entry *e)
{
	json_t *o = json_object();
	int bad = 0;

	if (!o)
		return NULL;
	bad |= json_object_set_new(o, "op", json_string("hint"));
	bad |= json_object_set_new(o, "id", json_integer((json_int_t)e->id));
	bad |= set_bytes(o, "replica", e->rep->name);
	bad |= set_bytes(o, "key", e->key);
	bad |= json_object_set_new(o, "kind", json_string(kind_name(e->kind)));
	bad |= json_object_set_new(o, "at", json_integer(e->at_ms));
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

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Reads the string field @name (or "<name>_hex") of @o into a new string
 * *@out. Returns 0, -EINVAL with @why set, or -ENOMEM.
 */
static int get_bytes(json_t *o, const char *name, char **out, char *why,
		     size_t whylen)
{
	const char *s = json_string_value(json_object_get(o, name));
	char hexname[32];
	size_t n;
	char *p;

	if (s) {
		if (!*s)
			goto out_empty;
		*out = strdup(s);
		return *out ? 0 : -ENOMEM;
	}
	snprintf(hexname, sizeof(hexname), "%s_hex", name);
	s = json_string_value(json_object_get(o, hexname));
	if (!s) {
		snprintf(why, whylen, "missing \"%s\"", name);
		return -EINVAL;
	}
	n = strlen(s);
	if (n == 0)
		goto out_empty;
	if (n % 2)
		goto out_bad_hex;
	p = malloc(n / 2 + 1);
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(p);
			goto out_bad_hex;
		}
		p[i] = (char)(hi << 4 | lo);
	}
	p[n / 2] = '\0';
	*out = p;
	return 0;

out_bad_hex:
	snprintf(why, whylen, "bad \"%s\"", hexname);
	return -EINVAL;
out_empty:
	snprintf(why, whylen, "empty \"%s\"", name);
	return -EINVAL;
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

/* Applies a loaded hint record. */
static int load_hint(struct smux__hints *h, json_t *o, char *why, size_t whylen)
{
	const char *kind = json_string_value(json_object_get(o, "kind"));
	json_t *at = json_object_get(o, "at");
	char *replica = NULL, *key = NULL;
	struct hint_replica *rep;
	struct hint_entry *e, *old;
	enum smux__hint_kind k;
	uint64_t id;
	int rc;

	rc = get_id(o, &id, why, whylen);
	if (rc)
		return rc;
	if (kind && strcmp(kind, "put") == 0) {
		k = SMUX__HINT_PUT;
	} else if (kind && strcmp(kind, "del") == 0) {
		k = SMUX__HINT_DEL;
	} else if (kind && strcmp(kind, "intent") == 0) {
		k = SMUX__HINT_INTENT;
	} else {
		snprintf(why, whylen, "missing or bad \"kind\"");
		return -EINVAL;
	}
	if (!json_is_integer(at)) {
		snprintf(why, whylen, "missing or bad \"at\"");
		return -EINVAL;
	}
	if (find_id(h, id)) {
		snprintf(why, whylen, "duplicate id %llu",
			 (unsigned long long)id);
		return -EINVAL;
	}
	rc = get_bytes(o, "replica", &replica, why, whylen);
	if (rc)
		goto out;
	rc = get_bytes(o, "key", &key, why, whylen);
	if (rc)
		goto out;
	rc = -ENOMEM;
	rep = get_replica(h, replica);
	if (!rep)
		goto out;
	e = entry_new(rep, key, id, k, (int64_t)json_integer_value(at));
	if (!e)
		goto out;
	/* A crash between a replacing hint and the done record of the hint
	 * it replaces leaves both; the later one wins, as in add. */
	old = find_rk(h, rep, key);
	if (old && old->id < id) {
		entry_unlink(h, old);
	} else if (old) {
		entry_free(e);
		e = NULL;
	}
	if (e)
		entry_link(h, e);
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
	} else if (strcmp(op, "done") == 0) {
		rc = get_id(o, &id, why, whylen);
		if (rc == 0) {
			struct hint_entry *e = find_id(h, id);

			if (e)
				entry_unlink(h, e);
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
static int journal_append(struct smux__hints *h, const char *buf, size_t len,
			  unsigned nlines, unsigned ndone, bool sync,
			  struct smux_error *err)
{
	const char *what;
	int rc;

	if (h->fd < 0)
		return 0;
	if (h->trunc_pending) {
		if (ftruncate(h->fd, h->size) != 0)
			return journal_error(err, h->path, "truncate", errno);
		h->trunc_pending = false;
	}
	if (h->dir_dirty) {
		rc = fsync_dir(h->dir);
		if (rc)
			return journal_error(err, h->dir, "fsync", -rc);
		h->dir_dirty = false;
	}
	/* One write(2) in practice; O_APPEND puts it at the end. */
	what = "write";
	rc = write_all(h->fd, buf, len);
	if (rc == 0 && sync) {
		what = "fdatasync";
		if (fdatasync(h->fd) != 0)
			rc = -errno;
	}
	if (rc) {
		if (ftruncate(h->fd, h->size) != 0)
			h->trunc_pending = true;
		else
			(void)fdatasync(h->fd);
		return journal_error(err, h->path, what, -rc);
	}
	h->size += (off_t)len;
	h->lines += nlines;
	h->done_lines += ndone;
	return 0;
}

/* Rewrites the file with the pending hints only (hints.h). */
static int journal_compact(struct smux__hints *h, struct smux_error *err)
{
	struct jbuf b = {0};
	off_t size = 0;
	int fd, rc;

	fd = open(h->tmp_path,
		  O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return journal_error(err, h->tmp_path, "open", errno);
	/* Locked before it takes the journal's name, as the old one is. */
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		rc = journal_error(err, h->tmp_path, "flock", errno);
		goto out_unlink;
	}
	for (struct hint_entry *e = h->head; e; e = e->next) {
		if (jbuf_add_record(&b, hint_record(e)) != 0) {
			rc = no_memory(err);
			goto out_unlink;
		}
		if (b.len >= HINTS_CHUNK || !e->next) {
			rc = write_all(fd, b.p, b.len);
			if (rc) {
				rc = journal_error(err, h->tmp_path, "write",
						   -rc);
				goto out_unlink;
			}
			size += (off_t)b.len;
			b.len = 0;
		}
	}
	if (fsync(fd) != 0) {
		rc = journal_error(err, h->tmp_path, "fsync", errno);
		goto out_unlink;
	}
	if (rename(h->tmp_path, h->path) != 0) {
		rc = journal_error(err, h->tmp_path, "rename", errno);
		goto out_unlink;
	}
	/* The new file is the journal now; until its name is durable, no
	 * append may succeed (journal_append retries the sync). */
	h->dir_dirty = fsync_dir(h->dir) != 0;
	close(h->fd);
	h->fd = fd;
	h->size = size;
	h->trunc_pending = false;
	h->lines = h->npending;
	h->done_lines = 0;
	free(b.p);
	return 0;

out_unlink:
	close(fd);
	unlink(h->tmp_path);
	free(b.p);
	return rc;
}

/* Compacts when due; a failure leaves the (valid) long file in place and
 * is retried at the next record. */
static void maybe_compact(struct smux__hints *h)
{
	if (h->fd >= 0 && h->lines > HINTS_COMPACT_MIN_LINES &&
	    h->done_lines > h->npending)
		(void)journal_compact(h, NULL);
}

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
static int check_name(const char *name, struct smux_error *err)
{
	size_t len = name ? strlen(name) : 0;
	bool ok = len > 0 && name[0] != '.' &&
		  len + sizeof(HINTS_TMP_SUFFIX) - 1 <= NAME_MAX;

	for (size_t i = 0; ok && i < len; i++) {
		char c = name[i];

		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		     (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
	}
	if (ok)
		return 0;
	return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
			      "mux name \"%.64s\" cannot name a hint journal "
			      "(use [A-Za-z0-9._-], not starting with '.')",
			      name ? name : "");
}

static int open_file(struct smux__hints *h, const char *state_dir,
		     const char *mux_name, struct smux_error *err)
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

int smux__hints_open(const char *state_dir, const char *mux_name,
		     struct smux__hints **out, struct smux_error *err)
{
	struct smux__hints *h;
	int rc;

	if (!out)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "hint journal: no result pointer");
	*out = NULL;
	rc = check_name(mux_name, err);
	if (rc)
		return rc;
	h = calloc(1, sizeof(*h));
	if (!h)
		return no_memory(err);
	h->fd = -1;
	h->next_id = 1;
	if (pthread_mutex_init(&h->lock, NULL) != 0) {
		free(h);
		return no_memory(err);
	}
	if (table_resize(h, HINTS_BUCKETS0) != 0) {
		rc = no_memory(err);
		goto out_close;
	}
	if (state_dir) {
		rc = open_file(h, state_dir, mux_name, err);
		if (rc)
			goto out_close;
		maybe_compact(h);
	}
	*out = h;
	return 0;

out_close:
	smux__hints_close(h);
	return rc;
}

void smux__hints_close(struct smux__hints *h)
{
	struct hint_entry *e, *enext;
	struct hint_replica *r, *rnext;

	if (!h)
		return;
	if (h->fd >= 0)
		close(h->fd);
	for (e = h->head; e; e = enext) {
		enext = e->next;
		entry_free(e);
	}
	for (r = h->replicas; r; r = rnext) {
		rnext = r->next;
		free(r->name);
		free(r);
	}
	free(h->by_id);
	free(h->by_rk);
	free(h->path);
	free(h->tmp_path);
	free(h->dir);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int check_args(const struct smux__hints *h, const char *replica,
		      const char *key, struct smux_error *err)
{
	if (!h || !replica || !*replica || !key || !*key)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "hint journal: missing %s",
				      !h		      ? "journal"
				      : !replica || !*replica ? "replica"
							      : "key");
	return 0;
}

int smux__hints_add(struct smux__hints *h, const char *replica, const char *key,
		    enum smux__hint_kind kind, uint64_t *id,
		    struct smux_error *err)
{
	struct hint_entry *e, *old;
	struct hint_replica *rep;
	struct jbuf b = {0};
	int rc;

	rc = check_args(h, replica, key, err);
	if (rc)
		return rc;
	if (kind != SMUX__HINT_PUT && kind != SMUX__HINT_DEL &&
	    kind != SMUX__HINT_INTENT)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "hint journal: bad kind %d", (int)kind);

	pthread_mutex_lock(&h->lock);
	rep = get_replica(h, replica);
	e = rep ? entry_new(rep, key, h->next_id, kind, now_ms()) : NULL;
	if (!e) {
		rc = no_memory(err);
		goto out_unlock;
	}
	/* Never reused, even when the append fails: its record may still
	 * reach the disk. */
	h->next_id++;
	old = find_rk(h, rep, key);
	/* The new hint first: a crash inside the append may lose the done
	 * record (both hints then pending), never the new hint alone. */
	if (jbuf_add_record(&b, hint_record(e)) != 0 ||
	    (old && jbuf_add_record(&b, done_record(old->id)) != 0)) {
		rc = no_memory(err);
		entry_free(e);
		goto out_unlock;
	}
	rc = journal_append(h, b.p, b.len, old ? 2 : 1, old ? 1 : 0, true, err);
	if (rc) {
		entry_free(e);
		goto out_unlock;
	}
	if (old)
		entry_unlink(h, old);
	entry_link(h, e);
	if (id)
		*id = e->id;
	maybe_compact(h);
out_unlock:
	pthread_mutex_unlock(&h->lock);
	free(b.p);
	return rc;
}

/* Records and applies the done record of @e (fdatasync'ed when @sync);
 * caller holds h->lock. */
static int mark_done_locked(struct smux__hints *h, struct hint_entry *e,
			    bool sync, struct smux_error *err)
{
	struct jbuf b = {0};
	int rc;

	if (jbuf_add_record(&b, done_record(e->id)) != 0) {
		rc = no_memory(err);
		goto out;
	}
	rc = journal_append(h, b.p, b.len, 1, 1, sync, err);
	if (rc)
		goto out;
	entry_unlink(h, e);
	maybe_compact(h);
out:
	free(b.p);
	return rc;
}

static int done_id(struct smux__hints *h, uint64_t id, bool sync,
		   struct smux_error *err)
{
	struct hint_entry *e;
	int rc = 0;

	if (!h)
		return check_args(h, NULL, NULL, err);
	pthread_mutex_lock(&h->lock);
	e = find_id(h, id);
	if (e)
		rc = mark_done_locked(h, e, sync, err);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int smux__hints_done(struct smux__hints *h, uint64_t id, struct smux_error *err)
{
	return done_id(h, id, true, err);
}

int smux__hints_done_lazy(struct smux__hints *h, uint64_t id,
			  struct smux_error *err)
{
	return done_id(h, id, false, err);
}

int smux__hints_supersede(struct smux__hints *h, const char *replica,
			  const char *key, struct smux_error *err)
{
	struct hint_entry *e;
	int rc;

	rc = check_args(h, replica, key, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&h->lock);
	e = find_rk(h, find_replica(h, replica), key);
	if (e)
		rc = mark_done_locked(h, e, true, err);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

unsigned smux__hints_pending(struct smux__hints *h, const char *replica)
{
	struct hint_replica *r;
	unsigned n;

	if (!h)
		return 0;
	pthread_mutex_lock(&h->lock);
	if (replica) {
		r = find_replica(h, replica);
		n = r ? r->pending : 0;
	} else {
		n = h->npending;
	}
	pthread_mutex_unlock(&h->lock);
	return n;
}

int smux__hints_list(struct smux__hints *h, const char *replica,
		     struct smux__hint **out)
{
	struct smux__hint *list = NULL;
	struct hint_replica *r = NULL;
	struct hint_entry *e;
	unsigned n;
	int i = 0, rc;

	*out = NULL;
	if (!h)
		return 0;
	pthread_mutex_lock(&h->lock);
	if (replica) {
		r = find_replica(h, replica);
		n = r ? r->pending : 0;
		e = r ? r->head : NULL;
	} else {
		n = h->npending;
		e = h->head;
	}
	rc = 0;
	if (n == 0)
		goto out_unlock;
	rc = -ENOMEM; /* also for a count an int cannot return */
	if (n > INT_MAX)
		goto out_unlock;
	list = calloc(n, sizeof(*list));
	if (!list)
		goto out_unlock;
	for (; e; e = r ? e->rnext : e->next, i++) {
		list[i].id = e->id;
		list[i].kind = e->kind;
		list[i].at_ms = e->at_ms;
		list[i].replica = strdup(e->rep->name);
		list[i].key = strdup(e->key);
		if (!list[i].replica || !list[i].key) {
			smux__hints_free_list(list, i + 1);
			list = NULL;
			goto out_unlock;
		}
	}
	rc = i;
	*out = list;
out_unlock:
	pthread_mutex_unlock(&h->lock);
	return rc;
}

void smux__hints_free_list(struct smux__hint *list, int n)
{
	if (!list)
		return;
	for (int i = 0; i < n; i++) {
		free(list[i].replica);
		free(list[i].key);
	}
	free(list);
}

const char *smux__hints_path(struct smux__hints *h)
{
	return h ? hints_path_of(h) : "";
}

bool smux__hints_has(struct smux__hints *h, const char *replica,
		     const char *key)
{
	bool has;

	if (!h || !replica || !key)
		return false;
	pthread_mutex_lock(&h->lock);
	has = find_rk(h, find_replica(h, replica), key) != NULL;
	pthread_mutex_unlock(&h->lock);
	return has;
}
