// SPDX-License-Identifier: MIT
/*
 * backends/memory.c - the memory backend (smux/memory.h).
 *
 * Owns: one sorted array of entries (key -> immutable, refcounted blob plus
 * metadata) behind one rwlock; lookups are binary searches. Blobs never
 * change once published, so:
 *  - put and writer commit build the new blob outside the lock and only
 *    swap a pointer under it (a reader sees the old or the new object);
 *  - get takes a reference under the read lock and streams the blob into
 *    the sink after unlocking;
 *  - copy shares the source's blob (O(1), still independent: an overwrite
 *    of either key publishes a new blob).
 * No lock is ever held across a sink, source or list callback, so a
 * callback may call back into the backend.
 *
 * Directories follow the object-store convention (DESIGN section 6): a key
 * ending in '/' is a zero-length marker, and any key under "d/" implies the
 * directory "d/", which head answers for "d/" and for "d".
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "smux/memory.h"

#define MEMB_PAGE      256  /* list entries copied out per lock hold */
#define MEMB_FILE_MODE 0644 /* default permission bits of an object */
#define MEMB_DIR_MODE  0755 /* ... of a marker or implied directory */

/* Immutable object content, shared by entries (copy) and readers (get). */
struct memb_blob {
	atomic_long refs;
	uint64_t size;
	unsigned char bytes[];
};

struct memb_entry {
	char *key;		/* owned */
	struct memb_blob *blob; /* one reference; NULL when empty */
	uint64_t version;	/* the etag: value of the publish counter */
	int64_t mtime_ns;
	/* file type (S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK) |
	 * permission bits; a symlink's blob is its target */
	uint32_t mode;
	int64_t atime_ns;
	int64_t ctime_ns;  /* every change of content or attributes */
	uint32_t uid, gid; /* with has_owner */
	bool has_owner;	   /* set by a put or setattr with an owner */
};

struct memb_backend {
	struct smux_backend base; /* first, for the downcast */
	pthread_rwlock_t lock;
	struct memb_entry *ents; /* protected by lock; strcmp-sorted */
	size_t n;		 /* protected by lock */
	size_t cap;		 /* protected by lock */
	uint64_t version;	 /* protected by lock (write side) */
};

/* What a key resolves to (memb_lookup). */
enum memb_kind {
	MEMB_NONE,
	MEMB_OBJECT,
	MEMB_DIR, /* a marker, or keys under "key/" */
};

struct memb_writer {
	struct smux_writer base; /* first, for the downcast */
	unsigned char *buf;	 /* pending content, cap bytes allocated */
	uint64_t size;
	size_t cap;
};

static const struct smux_backend_ops memb_ops;
static const struct smux_writer_ops memb_writer_ops;

static struct memb_backend *memb_from(struct smux_backend *b)
{
	if (!b || b->ops != &memb_ops)
		abort(); /* not a memory backend: a programming error */
	return (struct memb_backend *)b;
}

static struct memb_writer *memb_writer_from(struct smux_writer *w)
{
	if (!w || w->ops != &memb_writer_ops)
		abort();
	return (struct memb_writer *)w;
}

/* A store without an explicit mtime gets a time no other store had, so
 * its etag (size and mtime) is new even when its size is not. */
static int64_t memb_now_real_ns(void)
{
	return smux_unique_wall_ns();
}
/* A blob of @size uninitialised bytes, or NULL when out of memory. */
static struct memb_blob *memb_blob_new(uint64_t size)
{
	struct memb_blob *blob;

	if (size > SIZE_MAX - sizeof(*blob))
		return NULL;
	blob = malloc(sizeof(*blob) + (size_t)size);
	if (!blob)
		return NULL;
	atomic_init(&blob->refs, 1);
	blob->size = size;
	return blob;
}

static struct memb_blob *memb_blob_ref(struct memb_blob *blob)
{
	if (blob)
		atomic_fetch_add_explicit(&blob->refs, 1, memory_order_relaxed);
	return blob;
}

static void memb_blob_unref(struct memb_blob *blob)
{
	if (blob && atomic_fetch_sub_explicit(&blob->refs, 1,
					      memory_order_acq_rel) == 1)
		free(blob);
}

static bool memb_has_prefix(const char *s, const char *prefix, size_t plen)
{
	return strncmp(s, prefix, plen) == 0;
}

/* First index whose key is >= @key. Caller holds m->lock. */
static size_t memb_lower_bound(const struct memb_backend *m, const char *key)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(m->ents[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void memb_entry_info(const struct memb_entry *e, struct smux_info *info)
{
	smux_info_clear(info);
	info->size = e->blob ? e->blob->size : 0;
	info->mtime_ns = e->mtime_ns;
	info->mode = e->mode;
	info->atime_ns = e->atime_ns;
	info->ctime_ns = e->ctime_ns;
	info->has_times = true; /* kept as given, 0 included */
	if (e->has_owner) {
		info->uid = e->uid;
		info->gid = e->gid;
		info->has_owner = true;
	}
	info->nlink = S_ISDIR(e->mode) ? 0 : 1; /* a marker: not counted */
	/*
	 * The etag is size and mtime, not the publish counter: replicas that
	 * a mux wrote with one explicit mtime then agree on the version, so a
	 * read pinned to it can be served by any of them. Stores without an
	 * explicit mtime get a unique one (memb_now_real_ns).
	 */
	(void)snprintf(info->etag, sizeof(info->etag), "%" PRIx64 "-%" PRIx64,
		       info->size, (uint64_t)e->mtime_ns);
}

/*
 * Resolves @key under the (read or write) lock the caller holds. Fills
 * @info for MEMB_OBJECT and MEMB_DIR, and *@blob (when not NULL) with a
 * reference to an object's content.
 */
static enum memb_kind memb_lookup(const struct memb_backend *m, const char *key,
				  struct smux_info *info,
				  struct memb_blob **blob)
{
	char dir[SMUX_KEY_MAX + 2];
	size_t len = strlen(key), i = memb_lower_bound(m, key);
	const struct memb_entry *e;

	if (blob)
		*blob = NULL;
	if (i < m->n && strcmp(m->ents[i].key, key) == 0) {
		e = &m->ents[i];
		memb_entry_info(e, info);
		if (smux_key_is_dir(key))
			return MEMB_DIR;
		if (blob)
			*blob = memb_blob_ref(e->blob);
		return MEMB_OBJECT;
	}
	/* No such object: is it a directory with something under "key/"? */
	if (len > SMUX_KEY_MAX)
		return MEMB_NONE;
	memcpy(dir, key, len);
	if (!smux_key_is_dir(key))
		dir[len++] = '/';
	dir[len] = '\0';
	i = memb_lower_bound(m, dir);
	if (i >= m->n || !memb_has_prefix(m->ents[i].key, dir, len))
		return MEMB_NONE;
	e = &m->ents[i];
	if (strcmp(e->key, dir) == 0) {
		memb_entry_info(e, info); /* the marker itself */
		return MEMB_DIR;
	}
	/* Implied: no version of its own; the first child's time. */
	smux_info_clear(info);
	info->mtime_ns = e->mtime_ns;
	info->mode = S_IFDIR | MEMB_DIR_MODE;
	return MEMB_DIR;
}

static int memb_not_found(struct memb_backend *m, enum memb_kind kind,
			  const char *key, struct smux_error *err)
{
	if (kind == MEMB_DIR)
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, m->base.name,
				      "is a directory: %s", key);
	return smux_error_set(err, SMUX_E_KEY_NOT_FOUND, m->base.name,
			      "no such key: %s", key);
}

/*
 * Makes @key name @blob (reference consumed) with @mode and @mtime_ns,
 * under the write lock the caller holds. The owner and atime come from
 * @like (the entry copied or moved, NULL: a replaced entry keeps its own,
 * a new one has none and its mtime as atime); the ctime is now.
 * *@key_owned is a heap copy of the
 * key: taken when a new entry is inserted (set to NULL), left for the
 * caller to free otherwise. The replaced blob goes to *@old for the caller
 * to unref after unlocking. Returns 0 or -ENOMEM (nothing changed).
 */
static int memb_insert_locked(struct memb_backend *m, char **key_owned,
			      struct memb_blob *blob, uint32_t mode,
			      int64_t mtime_ns, const struct memb_entry *like,
			      struct smux_info *info, struct memb_blob **old)
{
	size_t i = memb_lower_bound(m, *key_owned);
	struct memb_entry *e;

	*old = NULL;
	if (i < m->n && strcmp(m->ents[i].key, *key_owned) == 0) {
		e = &m->ents[i];
		*old = e->blob;
	} else {
		if (m->n == m->cap) {
			size_t cap = m->cap ? m->cap * 2 : 64;
			struct memb_entry *v;

			if (cap > SIZE_MAX / sizeof(*v))
				return -ENOMEM;
			v = realloc(m->ents, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			m->ents = v;
			m->cap = cap;
		}
		memmove(&m->ents[i + 1], &m->ents[i],
			(m->n - i) * sizeof(m->ents[0]));
		m->n++;
		e = &m->ents[i];
		e->key = *key_owned;
		*key_owned = NULL;
		e->has_owner = false;
		e->uid = e->gid = SMUX_ID_NONE;
		e->atime_ns = mtime_ns;
	}
	if (like) {
		e->has_owner = like->has_owner;
		e->uid = like->uid;
		e->gid = like->gid;
		e->atime_ns = like->atime_ns;
	}
	e->blob = blob;
	e->version = ++m->version;
	e->mtime_ns = mtime_ns;
	e->mode = mode;
	e->ctime_ns = memb_now_real_ns();
	if (info)
		memb_entry_info(e, info);
	return 0;
}

static bool memb_is_special(uint32_t mode)
{
	return S_ISLNK(mode) || S_ISFIFO(mode) || S_ISSOCK(mode);
}

/* Publishes @blob (reference consumed, NULL = empty) under @key. */
static int memb_publish(struct memb_backend *m, const char *key,
			struct memb_blob *blob,
			const struct smux_put_opts *opts,
			struct smux_info *info, struct smux_error *err)
{
	bool dir = smux_key_is_dir(key);
	uint32_t mode =
		dir ? S_IFDIR | MEMB_DIR_MODE : S_IFREG | MEMB_FILE_MODE;
	int64_t mtime = opts && smux_put_has_mtime(opts) ? opts->mtime_ns
							 : memb_now_real_ns();
	struct memb_blob *old = NULL;
	char *key_owned = strdup(key);
	int rc;

	struct memb_entry like = {0}, *likep = NULL;

	if (opts && (opts->mode || (opts->flags & SMUX_PUT_MODE)))
		mode = (mode & S_IFMT) | (opts->mode & 07777);
	if (!dir && opts && memb_is_special(opts->mode)) {
		/* a symlink's mode is always 0777, as on Linux */
		uint32_t perm = S_ISLNK(opts->mode) ? 0777 : opts->mode & 07777;

		if (!perm && !(opts->flags & SMUX_PUT_MODE))
			perm = MEMB_FILE_MODE;
		mode = (opts->mode & S_IFMT) | perm;
	}
	if (opts && (opts->flags & SMUX_PUT_OWNER)) {
		/* SMUX_ID_NONE keeps that id: resolved under the lock */
		like.has_owner = true;
		like.uid = opts->uid;
		like.gid = opts->gid;
		like.atime_ns = mtime;
		likep = &like;
	}
	if (!key_owned) {
		memb_blob_unref(blob);
		return smux_error_set(err, SMUX_E_NO_MEMORY, m->base.name,
				      "out of memory storing %s", key);
	}
	pthread_rwlock_wrlock(&m->lock);
	if (likep && (like.uid == SMUX_ID_NONE || like.gid == SMUX_ID_NONE)) {
		size_t i = memb_lower_bound(m, key);
		bool found = i < m->n && strcmp(m->ents[i].key, key) == 0;

		if (found)
			like.atime_ns = m->ents[i].atime_ns;
		if (like.uid == SMUX_ID_NONE && found && m->ents[i].has_owner)
			like.uid = m->ents[i].uid;
		if (like.gid == SMUX_ID_NONE && found && m->ents[i].has_owner)
			like.gid = m->ents[i].gid;
	}
	rc = memb_insert_locked(m, &key_owned, blob, mode, mtime, likep, info,
				&old);
	pthread_rwlock_unlock(&m->lock);
	free(key_owned);
	memb_blob_unref(old);
	if (rc < 0) {
		memb_blob_unref(blob);
		return smux_error_set(err, SMUX_E_NO_MEMORY, m->base.name,
				      "out of memory storing %s", key);
	}
	return 0;
}

static int memb_get(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_get_opts *opts,
		    struct smux_sink *sink, struct smux_info *info,
		    struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	uint64_t off = opts ? opts->offset : 0;
	uint64_t want = opts ? opts->length : SMUX_LEN_ALL;
	struct memb_blob *blob;
	struct smux_info found;
	enum memb_kind kind;
	uint64_t end;
	int rc = 0;

	pthread_rwlock_rdlock(&m->lock);
	kind = memb_lookup(m, key, &found, &blob);
	pthread_rwlock_unlock(&m->lock);
	if (kind != MEMB_OBJECT)
		return memb_not_found(m, kind, key, err);

	if (opts && opts->if_match && opts->if_match[0] &&
	    strcmp(opts->if_match, found.etag) != 0) {
		rc = smux_error_set(err, SMUX_E_PRECONDITION_FAILED, b->name,
				    "%s: etag %s, wanted %s", key, found.etag,
				    opts->if_match);
		goto out_unref;
	}
	if (info)
		*info = found;
	if (off >= found.size)
		goto out_unref; /* past the end: 0 bytes */
	end = want >= found.size - off ? found.size : off + want;
	/* The blob is immutable and referenced: stream it without the lock. */
	while (off < end) {
		size_t n = end - off < SMUX_IO_CHUNK ? (size_t)(end - off)
						     : SMUX_IO_CHUNK;

		rc = smux_ctx_check(ctx, m->base.name, err);
		if (rc < 0)
			goto out_unref;
		rc = smux_sink_write(sink, blob->bytes + off, n);
		if (rc < 0) {
			rc = smux_error_from_errno(err, -rc, b->name,
						   "writing to the sink");
			goto out_unref;
		}
		off += n;
	}
out_unref:
	memb_blob_unref(blob);
	return rc;
}

static int memb_put(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_source *src,
		    const struct smux_put_opts *opts, struct smux_info *info,
		    struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	struct memb_blob *blob = NULL;
	uint64_t pos = 0;
	int rc;

	if (smux_key_is_dir(key) && src->length)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "directory marker %s must be empty", key);
	if (opts && memb_is_special(opts->mode) && !smux_key_is_dir(key) &&
	    (S_ISLNK(opts->mode) ? !src->length || src->length >= PATH_MAX
				 : src->length != 0))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "%s: a symlink's target takes 1 to %d "
				      "bytes, a FIFO or socket none",
				      key, PATH_MAX - 1);
	if (src->length) {
		blob = memb_blob_new(src->length);
		if (!blob)
			return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
					      "no memory for %" PRIu64
					      " bytes of %s",
					      src->length, key);
	}
	/* Chunk by chunk, so a cancelled context stops a long copy. */
	while (pos < src->length) {
		uint64_t left = src->length - pos;
		size_t n = left < SMUX_IO_CHUNK ? (size_t)left : SMUX_IO_CHUNK;
		long got;

		rc = smux_ctx_check(ctx, m->base.name, err);
		if (rc < 0)
			goto out_free;
		got = smux_source_read(src, pos, blob->bytes + pos, n);
		if (got <= 0) {
			rc = smux_error_from_errno(
				err, got < 0 ? (int)-got : EIO, b->name,
				"reading the source");
			goto out_free;
		}
		pos += (uint64_t)got;
	}
	return memb_publish(m, key, blob, opts, info, err);
out_free:
	memb_blob_unref(blob);
	return rc;
}

static int memb_del(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	struct memb_entry gone = {0};
	size_t i;

	pthread_rwlock_wrlock(&m->lock);
	i = memb_lower_bound(m, key);
	if (i < m->n && strcmp(m->ents[i].key, key) == 0) {
		gone = m->ents[i];
		memmove(&m->ents[i], &m->ents[i + 1],
			(m->n - i - 1) * sizeof(m->ents[0]));
		m->n--;
	}
	pthread_rwlock_unlock(&m->lock);
	/* Absent keys succeed (idempotent); a marker goes, its children stay. */
	free(gone.key);
	memb_blob_unref(gone.blob);
	return 0;
}

static int memb_head(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_info *info,
		     struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	struct smux_info found;
	enum memb_kind kind;

	pthread_rwlock_rdlock(&m->lock);
	kind = memb_lookup(m, key, &found, NULL);
	pthread_rwlock_unlock(&m->lock);
	if (kind == MEMB_NONE)
		return memb_not_found(m, kind, key, err);
	if (info)
		*info = found;
	return 0;
}

/* Entries of a listing copied out of the array, handed out unlocked. */
struct memb_page {
	struct smux_list_entry ents[MEMB_PAGE]; /* keys are heap copies */
	size_t n;
};

static void memb_page_clear(struct memb_page *p)
{
	for (size_t i = 0; i < p->n; i++)
		free((char *)p->ents[i].key);
	p->n = 0;
}

/* Appends @len bytes of @key: entry @e, or a common prefix when @e is
 * NULL. False when out of memory. */
static bool memb_page_add(struct memb_page *p, const char *key, size_t len,
			  const struct memb_entry *e)
{
	struct smux_list_entry *le = &p->ents[p->n];
	char *copy = strndup(key, len);

	if (!copy)
		return false;
	memset(le, 0, sizeof(*le));
	le->key = copy;
	le->is_prefix = !e;
	if (e)
		memb_entry_info(e, &le->info);
	p->n++;
	return true;
}

/* Where a paginated listing stands between two lock holds. */
struct memb_cursor {
	const char *prefix;
	size_t plen;
	const char *delim; /* NULL: no folding */
	size_t dlen;
	char *after; /* last key examined; resume past it (NULL: start) */
	char *last;  /* last key handed out, to fold a prefix only once */
	bool done;
};

/* The key of the most recent entry handed out or queued, or NULL. */
static const char *memb_cursor_last(const struct memb_cursor *c,
				    const struct memb_page *p)
{
	return p->n ? p->ents[p->n - 1].key : c->last;
}

/*
 * Fills @p with the next entries of the listing, under the read lock the
 * caller holds. Returns 0 or -ENOMEM.
 */
static int memb_list_fill(const struct memb_backend *m, struct memb_cursor *c,
			  struct memb_page *p)
{
	size_t i = 0, start;

	if (c->after) {
		i = memb_lower_bound(m, c->after);
		if (i < m->n && strcmp(m->ents[i].key, c->after) == 0)
			i++;
	} else {
		i = memb_lower_bound(m, c->prefix);
	}
	start = i;
	while (i < m->n && p->n < MEMB_PAGE) {
		const struct memb_entry *e = &m->ents[i];
		const char *rest = e->key + c->plen, *d;
		const char *last;
		size_t klen;

		if (!memb_has_prefix(e->key, c->prefix, c->plen)) {
			c->done = true;
			break;
		}
		i++;
		/* Folded, the directory listed is not an entry of itself;
		 * unfolded, its marker shows like any other (below). */
		if (!*rest && c->delim && smux_key_is_dir(c->prefix))
			continue;
		d = c->delim ? strstr(rest, c->delim) : NULL;
		if (d) {
			klen = (size_t)(d - e->key) + c->dlen;
			last = memb_cursor_last(c, p);
			/* Every key of one common prefix is contiguous. */
			while (i < m->n &&
			       memb_has_prefix(m->ents[i].key, e->key, klen))
				i++;
			if (last && strlen(last) == klen &&
			    memb_has_prefix(last, e->key, klen))
				continue; /* folded on an earlier page */
			if (!memb_page_add(p, e->key, klen, NULL))
				return -ENOMEM;
			continue;
		}
		/* Unfolded: a marker shows only for an empty directory. */
		klen = strlen(e->key);
		if (smux_key_is_dir(e->key) && i < m->n &&
		    memb_has_prefix(m->ents[i].key, e->key, klen))
			continue;
		if (!memb_page_add(p, e->key, klen, e))
			return -ENOMEM;
	}
	if (i >= m->n)
		c->done = true;
	if (i > start) {
		char *after = strdup(m->ents[i - 1].key);

		if (!after)
			return -ENOMEM;
		free(c->after);
		c->after = after;
	}
	return 0;
}

static int memb_list(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *prefix, const char *delimiter, smux_list_fn fn,
		     void *arg, struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	struct memb_cursor c = {
		.prefix = prefix ? prefix : "",
		.delim = delimiter && delimiter[0] ? delimiter : NULL,
	};
	struct memb_page *p = calloc(1, sizeof(*p));
	int rc = 0;

	if (!p)
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				      "out of memory listing %s", c.prefix);
	c.plen = strlen(c.prefix);
	c.dlen = c.delim ? strlen(c.delim) : 0;
	while (!c.done) {
		rc = smux_ctx_check(ctx, m->base.name, err);
		if (rc < 0)
			break;
		pthread_rwlock_rdlock(&m->lock);
		rc = memb_list_fill(m, &c, p);
		pthread_rwlock_unlock(&m->lock);
		if (rc < 0) {
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
					    "out of memory listing %s",
					    c.prefix);
			break;
		}
		for (size_t i = 0; i < p->n; i++) {
			if (fn(arg, &p->ents[i]) != 0) {
				c.done = true; /* the caller stopped */
				break;
			}
		}
		if (p->n) {
			char *last = strdup(p->ents[p->n - 1].key);

			if (!last) {
				rc = smux_error_set(
					err, SMUX_E_NO_MEMORY, b->name,
					"out of memory listing %s", c.prefix);
				break;
			}
			free(c.last);
			c.last = last;
		}
		memb_page_clear(p);
	}
	memb_page_clear(p);
	free(p);
	free(c.after);
	free(c.last);
	return rc;
}

static int memb_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *src, const char *dst, struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	struct memb_blob *blob, *old = NULL;
	struct smux_info found;
	enum memb_kind kind = MEMB_NONE;
	char *key_owned;
	size_t i;
	int rc = 0;

	/* A marker copies to a marker (an empty directory), nothing else. */
	if (smux_key_is_dir(src) != smux_key_is_dir(dst))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "cannot copy %s to %s", src, dst);
	key_owned = strdup(dst);
	if (!key_owned)
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				      "out of memory copying %s", src);
	/* One write-lock hold: the copy is of one version of @src. */
	pthread_rwlock_wrlock(&m->lock);
	i = memb_lower_bound(m, src);
	if (i < m->n && strcmp(m->ents[i].key, src) == 0) {
		/* a copy: the insert may move the array */
		const struct memb_entry e = m->ents[i];

		blob = memb_blob_ref(e.blob);
		/* keep owner, mode and mtime, as the file backend, mv and
		 * replicas copying the same source do */
		rc = memb_insert_locked(m, &key_owned, blob, e.mode, e.mtime_ns,
					&e, NULL, &old);
		if (rc < 0)
			memb_blob_unref(blob);
	} else {
		kind = memb_lookup(m, src, &found, NULL); /* for the error */
		rc = 1;
	}
	pthread_rwlock_unlock(&m->lock);
	free(key_owned);
	memb_blob_unref(old);
	if (rc < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				      "out of memory copying %s", src);
	if (rc > 0)
		return memb_not_found(m, kind, src, err);
	return 0;
}

/* Atomic rename: one write-lock hold moves the object, keeping its mode
 * and mtime (as rename(2) does). */
static int memb_rename(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *src, const char *dst, struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	struct memb_blob *old = NULL;
	struct memb_entry gone = {0};
	struct smux_info found;
	enum memb_kind kind = MEMB_NONE;
	char *key_owned = strdup(dst);
	size_t i;
	int rc = 1;

	if (!key_owned)
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				      "out of memory renaming %s", src);
	pthread_rwlock_wrlock(&m->lock);
	i = memb_lower_bound(m, src);
	if (i < m->n && strcmp(m->ents[i].key, src) == 0) {
		struct memb_entry e = m->ents[i];

		rc = memb_insert_locked(m, &key_owned, memb_blob_ref(e.blob),
					e.mode, e.mtime_ns, &e, NULL, &old);
		if (rc < 0) {
			memb_blob_unref(e.blob);
		} else {
			/* the insert may have shifted the array */
			i = memb_lower_bound(m, src);
			gone = m->ents[i];
			memmove(&m->ents[i], &m->ents[i + 1],
				(m->n - i - 1) * sizeof(m->ents[0]));
			m->n--;
		}
	} else {
		kind = memb_lookup(m, src, &found, NULL);
	}
	pthread_rwlock_unlock(&m->lock);
	free(key_owned);
	free(gone.key);
	memb_blob_unref(gone.blob);
	memb_blob_unref(old);
	if (rc < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				      "out of memory renaming %s", src);
	if (rc > 0)
		return memb_not_found(m, kind, src, err);
	return 0;
}

static int memb_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const struct smux_setattr *a,
			struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	struct smux_info found;
	enum memb_kind kind = MEMB_NONE;
	size_t i;
	int rc = 1;

	pthread_rwlock_wrlock(&m->lock);
	i = memb_lower_bound(m, key);
	if (i < m->n && strcmp(m->ents[i].key, key) == 0) {
		struct memb_entry *e = &m->ents[i];

		if (a->flags & SMUX_SET_OWNER) {
			if (!e->has_owner)
				e->uid = e->gid = SMUX_ID_NONE;
			if (a->uid != SMUX_ID_NONE)
				e->uid = a->uid;
			if (a->gid != SMUX_ID_NONE)
				e->gid = a->gid;
			e->has_owner = true;
			/* as the kernel does on a chown of a file */
			if (S_ISREG(e->mode))
				e->mode &=
					~(uint32_t)(e->mode & S_IXGRP
							    ? S_ISUID | S_ISGID
							    : S_ISUID);
		}
		if (a->flags & SMUX_SET_MODE)
			e->mode = (e->mode & S_IFMT) | (a->mode & 07777);
		if (a->flags & SMUX_SET_MTIME)
			e->mtime_ns = a->mtime_ns;
		if (a->flags & SMUX_SET_ATIME)
			e->atime_ns = a->atime_ns;
		e->ctime_ns = memb_now_real_ns();
		rc = 0;
	} else {
		kind = memb_lookup(m, key, &found, NULL);
	}
	pthread_rwlock_unlock(&m->lock);
	if (rc == 0)
		return 0;
	if (kind == MEMB_DIR && smux_key_is_dir(key))
		return 0; /* an implied directory keeps no attributes */
	return memb_not_found(m, kind == MEMB_DIR ? MEMB_NONE : kind, key, err);
}

static int memb_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			    struct smux_error *err)
{
	memb_from(b);
	return 0;
}

static int memb_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
		       struct smux_statfs *out, struct smux_error *err)
{
	memb_from(b);
	memset(out, 0, sizeof(*out)); /* unbounded: "unknown" */
	return 0;
}

/* Makes room for @size pending bytes. */
static int memb_writer_reserve(struct memb_writer *w, uint64_t size,
			       struct smux_error *err)
{
	size_t cap;
	unsigned char *buf;

	if (size <= w->cap)
		return 0;
	if (size > SIZE_MAX / 2)
		goto out_nomem;
	cap = w->cap < 4096 ? 4096 : w->cap;
	while (cap < size)
		cap *= 2;
	buf = realloc(w->buf, cap);
	if (!buf)
		goto out_nomem;
	w->buf = buf;
	w->cap = cap;
	return 0;
out_nomem:
	return smux_error_set(err, SMUX_E_NO_MEMORY, w->base.backend->name,
			      "no memory for %" PRIu64 " pending bytes of %s",
			      size, w->base.key);
}

/* Sets the pending size, zero-filling any growth. */
static int memb_writer_resize(struct memb_writer *w, uint64_t size,
			      struct smux_error *err)
{
	int rc = memb_writer_reserve(w, size, err);

	if (rc < 0)
		return rc;
	if (size > w->size)
		memset(w->buf + w->size, 0, (size_t)(size - w->size));
	w->size = size;
	return 0;
}

static int memb_writer_pwrite(struct smux_writer *sw,
			      const struct smux_ctx *ctx, const void *buf,
			      size_t len, uint64_t off, struct smux_error *err)
{
	struct memb_writer *w = memb_writer_from(sw);
	int rc;

	if (off > UINT64_MAX - len)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      sw->backend->name,
				      "write past the largest offset");
	if (off + len > w->size) {
		rc = memb_writer_resize(w, off + len, err);
		if (rc < 0)
			return rc;
	}
	if (len)
		memcpy(w->buf + off, buf, len);
	return 0;
}

static long memb_writer_pread(struct smux_writer *sw, void *buf, size_t len,
			      uint64_t off, struct smux_error *err)
{
	struct memb_writer *w = memb_writer_from(sw);
	uint64_t n;

	if (off >= w->size)
		return 0;
	n = w->size - off < len ? w->size - off : len;
	if (n > LONG_MAX)
		n = LONG_MAX;
	memcpy(buf, w->buf + off, (size_t)n);
	return (long)n;
}

static int memb_writer_truncate(struct smux_writer *sw,
				const struct smux_ctx *ctx, uint64_t size,
				struct smux_error *err)
{
	return memb_writer_resize(memb_writer_from(sw), size, err);
}

static uint64_t memb_writer_size(struct smux_writer *sw)
{
	return memb_writer_from(sw)->size;
}

/* Publishes a snapshot of the pending content; the writer stays open. */
static int memb_writer_commit(struct smux_writer *sw,
			      const struct smux_ctx *ctx,
			      const struct smux_put_opts *opts,
			      struct smux_info *info, struct smux_error *err)
{
	struct memb_writer *w = memb_writer_from(sw);
	struct memb_backend *m = memb_from(sw->backend);
	struct memb_blob *blob = NULL;
	int rc = smux_ctx_check(ctx, m->base.name, err);

	if (rc < 0)
		return rc;
	if (w->size) {
		blob = memb_blob_new(w->size);
		if (!blob)
			return smux_error_set(
				err, SMUX_E_NO_MEMORY, m->base.name,
				"no memory to commit %s", sw->key);
		memcpy(blob->bytes, w->buf, (size_t)w->size);
	}
	return memb_publish(m, sw->key, blob, opts, info, err);
}

static void memb_writer_close(struct smux_writer *sw)
{
	struct memb_writer *w = memb_writer_from(sw);

	free(w->buf);
	smux_writer_release(&w->base);
	free(w);
}

static int memb_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			    const char *key, unsigned flags,
			    struct smux_writer **out, struct smux_error *err)
{
	struct memb_backend *m = memb_from(b);
	struct memb_blob *blob = NULL;
	struct memb_writer *w;
	struct smux_info found;
	int rc;

	if (smux_key_is_dir(key))
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, b->name,
				      "cannot write to directory %s", key);
	w = calloc(1, sizeof(*w));
	if (!w || smux_writer_init(&w->base, &memb_writer_ops, b, key) < 0) {
		free(w);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				      "out of memory opening %s", key);
	}
	if (!(flags & SMUX_WRITER_TRUNC)) {
		/* Start from the current object; copy it out unlocked. */
		pthread_rwlock_rdlock(&m->lock);
		memb_lookup(m, key, &found, &blob);
		pthread_rwlock_unlock(&m->lock);
		if (blob) {
			rc = memb_writer_resize(w, blob->size, err);
			if (rc == 0)
				memcpy(w->buf, blob->bytes, (size_t)blob->size);
			memb_blob_unref(blob);
			if (rc < 0) {
				memb_writer_close(&w->base);
				return rc;
			}
		}
	}
	*out = &w->base;
	return 0;
}

/* A memory backend keeps owners (as metadata); its head answers for a
 * directory "d/" by "d" too. */
static unsigned memb_caps(struct smux_backend *b)
{
	memb_from(b);
	return SMUX_CAP_OWNER | SMUX_CAP_HEAD_DIR | SMUX_CAP_LISTS_DOTNAMES |
	       SMUX_CAP_SYMLINK | SMUX_CAP_FIFO;
}

static void memb_destroy(struct smux_backend *b)
{
	struct memb_backend *m = memb_from(b);

	for (size_t i = 0; i < m->n; i++) {
		free(m->ents[i].key);
		memb_blob_unref(m->ents[i].blob);
	}
	free(m->ents);
	pthread_rwlock_destroy(&m->lock);
	smux_backend_release(&m->base);
	free(m);
}

static const struct smux_backend_ops memb_ops = {
	.kind = "memory",
	.get = memb_get,
	.put = memb_put,
	.del = memb_del,
	.head = memb_head,
	.list = memb_list,
	.copy = memb_copy,
	.rename = memb_rename,
	.setattr = memb_setattr,
	.healthcheck = memb_healthcheck,
	.statfs = memb_statfs,
	.writer_open = memb_writer_open,
	.caps = memb_caps,
	.destroy = memb_destroy,
};

static const struct smux_writer_ops memb_writer_ops = {
	.pwrite = memb_writer_pwrite,
	.pread = memb_writer_pread,
	.truncate = memb_writer_truncate,
	.size = memb_writer_size,
	.commit = memb_writer_commit,
	.close = memb_writer_close,
};

int smux_memory_new(const char *name, struct smux_backend **out,
		    struct smux_error *err)
{
	struct memb_backend *m = calloc(1, sizeof(*m));
	pthread_rwlockattr_t attr;
	int rc;

	if (!m)
		goto out_nomem;
	if (smux_backend_init(&m->base, &memb_ops, name) < 0)
		goto out_free;
	/* Nothing re-enters the lock (no callback runs under it), so writers
	 * may be preferred: a stream of gets cannot starve a put. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = pthread_rwlock_init(&m->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc != 0)
		goto out_release;
	*out = &m->base;
	return 0;
out_release:
	smux_backend_release(&m->base);
out_free:
	free(m);
out_nomem:
	return smux_error_set(err, SMUX_E_NO_MEMORY, name,
			      "out of memory creating memory backend");
}

unsigned long smux_memory_count(struct smux_backend *b)
{
	struct memb_backend *m = memb_from(b);
	unsigned long n;

	pthread_rwlock_rdlock(&m->lock);
	n = m->n;
	pthread_rwlock_unlock(&m->lock);
	return n;
}
