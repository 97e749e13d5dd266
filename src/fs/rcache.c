/* SPDX-License-Identifier: MIT */
/*
 * rcache.c - the on-disk read cache (see rcache.h for the contract).
 *
 * Files: cache_dir/read/HASH-GEN, HASH the SHA-256 of key NUL etag in hex
 * and GEN a counter of this run, so the file of a version dropped while a
 * read still uses it never collides with a newer fill of the same
 * version. A fill writes HASH-GEN.tmp and renames it when complete.
 *
 * Index: a hash table of entries by key, plus an LRU list (head: most
 * recently used) of the entries in the table. An entry is referenced by
 * the table and by every read using it; a dropped entry (evicted or
 * forgotten) leaves the table at once and its file is deleted with its
 * last reference. `bytes` charges every entry not yet deleted (its size
 * rounded up to 4 KiB blocks, reserved before its fill starts), so the
 * files on disk never exceed the capacity.
 *
 * Locks: rc->lock protects the table, the LRU list, the counters and each
 * entry's state, charge, refs and links; the key, etag, size and name of
 * an entry never change. Never held across a backend call, a file read or
 * write, or an unlink (dropped entries are reaped after unlocking).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/rcache.h"
#include "smux/mux.h"

#define RC_BUCKETS  16384
#define RC_BLOCK    4096ULL
#define RC_HASH_HEX 64
/* HASH "-" GEN(16 hex) NUL; a fill's temporary name adds ".tmp" */
#define RC_NAME_LEN (RC_HASH_HEX + 1 + 16 + 1)

enum rentry_state {
	RE_FILLING, /* the first reader is fetching it; others wait */
	RE_READY,   /* the file is complete */
	RE_FAILED,  /* the fill failed at failed_ns; no file */
};

struct rentry {
	/* set at creation, never changed */
	char *key;
	char *etag;
	uint64_t size;
	char name[RC_NAME_LEN];
	/* protected by rc->lock */
	enum rentry_state state;
	uint64_t charge; /* bytes counted in rc->bytes */
	int64_t failed_ns;
	unsigned refs; /* the table's (while in_table) + one per reader */
	bool in_table;
	struct rentry *hnext;	      /* hash chain */
	struct rentry *lprev, *lnext; /* LRU list */
	struct rentry *dnext;	      /* reap list (refs == 0) */
};

struct smuxfs_rcache {
	int dirfd;
	uint64_t capacity;
	uint64_t max_object;
	struct smux_backend *backend; /* one reference */

	pthread_mutex_t lock;
	pthread_cond_t filled; /* broadcast when a fill ends */
	/* protected by lock: */
	struct rentry *buckets[RC_BUCKETS];
	struct rentry *lru_head, *lru_tail;
	uint64_t gen;
	uint64_t bytes, entries;
	uint64_t hits, misses, fills, fill_failures, fill_bytes, evictions;
	/* counted without the lock */
	atomic_ullong bypassed;
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static unsigned bucket_of(const char *key)
{
	return smux_fnv1a(key, strlen(key)) % RC_BUCKETS;
}

/* HASH of key NUL etag into @out (RC_HASH_HEX + 1 bytes). */
static int name_hash(const char *key, const char *etag, char *out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok;

	if (!c)
		return -ENOMEM;
	ok = EVP_DigestInit_ex(c, EVP_sha256(), NULL) &&
	     EVP_DigestUpdate(c, key, strlen(key) + 1) &&
	     EVP_DigestUpdate(c, etag, strlen(etag)) &&
	     EVP_DigestFinal_ex(c, md, &mdlen) && mdlen * 2 == RC_HASH_HEX;
	EVP_MD_CTX_free(c);
	if (!ok)
		return -EIO;
	for (size_t i = 0; i < mdlen; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[RC_HASH_HEX] = '\0';
	return 0;
}

/* ---- the index (callers hold rc->lock) ---- */

static void lru_unlink(struct smuxfs_rcache *rc, struct rentry *e)
{
	if (e->lprev)
		e->lprev->lnext = e->lnext;
	else
		rc->lru_head = e->lnext;
	if (e->lnext)
		e->lnext->lprev = e->lprev;
	else
		rc->lru_tail = e->lprev;
	e->lprev = e->lnext = NULL;
}

static void lru_push(struct smuxfs_rcache *rc, struct rentry *e)
{
	e->lprev = NULL;
	e->lnext = rc->lru_head;
	if (rc->lru_head)
		rc->lru_head->lprev = e;
	else
		rc->lru_tail = e;
	rc->lru_head = e;
}

static struct rentry *table_find(struct smuxfs_rcache *rc, const char *key,
				 const char *etag, uint64_t size)
{
	struct rentry *e = rc->buckets[bucket_of(key)];

	for (; e; e = e->hnext)
		if (e->size == size && strcmp(e->key, key) == 0 &&
		    strcmp(e->etag, etag) == 0)
			return e;
	return NULL;
}

static void table_insert(struct smuxfs_rcache *rc, struct rentry *e)
{
	struct rentry **b = &rc->buckets[bucket_of(e->key)];

	e->hnext = *b;
	*b = e;
	e->in_table = true;
	e->refs++;
	rc->entries++;
	lru_push(rc, e);
}

/* Drops one reference; the entry goes on @dead (to be reaped after
 * unlocking) when it was the last one. */
static void entry_unref(struct smuxfs_rcache *rc, struct rentry *e,
			struct rentry **dead)
{
	if (--e->refs > 0)
		return;
	rc->bytes -= e->charge;
	e->charge = 0;
	e->dnext = *dead;
	*dead = e;
}

static void table_remove(struct smuxfs_rcache *rc, struct rentry *e,
			 struct rentry **dead)
{
	struct rentry **p = &rc->buckets[bucket_of(e->key)];

	for (; *p; p = &(*p)->hnext) {
		if (*p == e) {
			*p = e->hnext;
			break;
		}
	}
	e->hnext = NULL;
	e->in_table = false;
	rc->entries--;
	lru_unlink(rc, e);
	entry_unref(rc, e, dead);
}

/* Evicts least recently used idle entries until @need more bytes and one
 * more entry fit. False when they cannot (busy entries hold the room). */
static bool make_room(struct smuxfs_rcache *rc, uint64_t need,
		      struct rentry **dead)
{
	struct rentry *e = rc->lru_tail;

	if (need > rc->capacity)
		return false;
	while (e && (rc->bytes + need > rc->capacity ||
		     rc->entries >= SMUXFS_RCACHE_MAX_ENTRIES)) {
		struct rentry *prev = e->lprev;

		/* in use: dropping it would not free its bytes yet */
		if (e->state != RE_FILLING && e->refs == 1) {
			if (e->state == RE_READY)
				rc->evictions++;
			table_remove(rc, e, dead);
		}
		e = prev;
	}
	return rc->bytes + need <= rc->capacity &&
	       rc->entries < SMUXFS_RCACHE_MAX_ENTRIES;
}

/* Deletes the files of dropped entries and frees them. Without the lock. */
static void reap(struct smuxfs_rcache *rc, struct rentry *dead)
{
	while (dead) {
		struct rentry *e = dead;

		dead = e->dnext;
		if (e->state == RE_READY && unlinkat(rc->dirfd, e->name, 0) &&
		    errno != ENOENT)
			smux_log(LOG_WARNING, "read cache: deleting %s: %s",
				 e->name, strerror(errno));
		free(e->key);
		free(e->etag);
		free(e);
	}
}

static struct rentry *entry_new(struct smuxfs_rcache *rc, const char *key,
				const char *etag, uint64_t size)
{
	struct rentry *e = calloc(1, sizeof(*e));
	char hash[RC_HASH_HEX + 1];

	if (!e)
		return NULL;
	e->key = strdup(key);
	e->etag = strdup(etag);
	if (!e->key || !e->etag || name_hash(key, etag, hash) != 0) {
		free(e->key);
		free(e->etag);
		free(e);
		return NULL;
	}
	e->size = size;
	e->state = RE_FILLING;
	snprintf(e->name, sizeof(e->name), "%s-%016llx", hash,
		 (unsigned long long)rc->gen++);
	return e;
}

/* ---- files (never with the lock) ---- */

/* A sink into the fill's file that refuses more than the expected size. */
struct fill_sink {
	int fd;
	uint64_t pos, limit;
};

static int fill_write(void *arg, const void *data, size_t len)
{
	struct fill_sink *fs = arg;
	size_t done = 0;

	if (len > fs->limit - fs->pos)
		return -EFBIG;
	while (done < len) {
		ssize_t n = pwrite(fs->fd, (const char *)data + done,
				   len - done, (off_t)(fs->pos + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	fs->pos += len;
	return 0;
}

/* A retry on another backend starts over; the same version (If-Match)
 * overwrites the same bytes. */
static int fill_rewind(void *arg)
{
	((struct fill_sink *)arg)->pos = 0;
	return 0;
}

/* Fetches the whole version of @e into its file. 0 or a negative errno
 * (then no file is left). */
static int fill(struct smuxfs_rcache *rc, struct rentry *e)
{
	struct fill_sink fs = {.limit = e->size};
	struct smux_get_opts opts = {
		.offset = 0,
		.length = SMUX_LEN_ALL,
		.if_match = e->etag,
	};
	char tmp[RC_NAME_LEN + 4], msg[512];
	struct smux_error err;
	struct smux_sink sink;
	struct smux_ctx ctx;
	int ret, level;

	snprintf(tmp, sizeof(tmp), "%s.tmp", e->name);
	fs.fd = openat(rc->dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
		       0600);
	if (fs.fd < 0) {
		ret = -errno;
		smux_log(LOG_WARNING, "read cache: creating %s: %s", tmp,
			 strerror(-ret));
		return ret;
	}
	smux_sink_cb(&sink, fill_write, fill_rewind, &fs);
	smux_ctx_init(&ctx);
	ret = smux_backend_get(rc->backend, &ctx, e->key, &opts, &sink, NULL,
			       &err);
	if (ret) {
		/* a version replaced or removed since the open is routine */
		level = LOG_WARNING;
		if (err.e.code == SMUX_E_PRECONDITION_FAILED ||
		    err.e.code == SMUX_E_KEY_NOT_FOUND)
			level = LOG_DEBUG;
		smux_log(level, "read cache: fill of %s failed: %s", e->key,
			 smux_error_format(&err, msg, sizeof(msg)));
		goto out_unlink;
	}
	if (fs.pos != e->size) {
		smux_log(LOG_WARNING,
			 "read cache: fill of %s got %llu bytes, not %llu",
			 e->key, (unsigned long long)fs.pos,
			 (unsigned long long)e->size);
		ret = -EIO;
		goto out_unlink;
	}
	if (renameat(rc->dirfd, tmp, rc->dirfd, e->name) < 0) {
		ret = -errno;
		smux_log(LOG_WARNING, "read cache: renaming %s: %s", tmp,
			 strerror(-ret));
		goto out_unlink;
	}
	close(fs.fd);
	return 0;
out_unlink:
	unlinkat(rc->dirfd, tmp, 0);
	close(fs.fd);
	return ret < 0 ? ret : -EIO;
}

/* Reads from the complete file of @e. Bytes, or a negative errno. */
static long file_read(struct smuxfs_rcache *rc, const struct rentry *e,
		      char *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	long n;
	int fd;

	if (off >= e->size)
		return 0;
	if (len > e->size - off)
		len = (size_t)(e->size - off);
	fd = openat(rc->dirfd, e->name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		n = -errno;
		smux_log(LOG_WARNING, "read cache: opening %s: %s", e->name,
			 strerror(errno));
		return n;
	}
	while (done < len) {
		ssize_t r =
			pread(fd, buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	/* the file is ours and complete: short means it was damaged */
	n = done == len ? (long)done : -EIO;
	close(fd);
	return n;
}

/* Deletes every entry of the directory @dirfd (not closed). */
static int clear_dir(int dirfd)
{
	struct dirent *d;
	DIR *dir;
	int fd = dup(dirfd);

	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return -errno;
	}
	rewinddir(dir);
	while ((d = readdir(dir))) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd, d->d_name, 0) < 0 &&
		    unlinkat(dirfd, d->d_name, AT_REMOVEDIR) < 0)
			smux_log(LOG_WARNING,
				 "read cache: cannot delete %s: %s", d->d_name,
				 strerror(errno));
	}
	closedir(dir);
	return 0;
}

/* ---- the interface ---- */

int smuxfs_rcache_discard(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = clear_dir(fd);
	close(fd);
	return rc;
}

int smuxfs_rcache_new(const char *dir, uint64_t capacity,
		      struct smux_backend *backend, struct smuxfs_rcache **out,
		      char *why, size_t whylen)
{
	struct smuxfs_rcache *rc;
	int r;

	*out = NULL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		goto out_free;
	}
	rc->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rc->dirfd < 0) {
		r = -errno;
		goto out_free;
	}
	r = clear_dir(rc->dirfd);
	if (r)
		goto out_close;
	rc->capacity = capacity;
	rc->max_object = capacity / SMUXFS_RCACHE_MAX_SHARE;
	rc->backend = smux_backend_ref(backend);
	pthread_mutex_init(&rc->lock, NULL);
	pthread_cond_init(&rc->filled, NULL);
	atomic_init(&rc->bypassed, 0);
	*out = rc;
	return 0;
out_close:
	close(rc->dirfd);
out_free:
	free(rc);
	if (why)
		snprintf(why, whylen, "read cache %s: %s", dir, strerror(-r));
	return r;
}

void smuxfs_rcache_free(struct smuxfs_rcache *rc)
{
	struct rentry *dead = NULL;

	if (!rc)
		return;
	pthread_mutex_lock(&rc->lock);
	while (rc->lru_head)
		table_remove(rc, rc->lru_head, &dead);
	pthread_mutex_unlock(&rc->lock);
	reap(rc, dead);
	pthread_cond_destroy(&rc->filled);
	pthread_mutex_destroy(&rc->lock);
	smux_backend_unref(rc->backend);
	close(rc->dirfd);
	free(rc);
}

long smuxfs_rcache_read(struct smuxfs_rcache *rc, const char *key,
			const char *etag, uint64_t size, char *buf, size_t len,
			uint64_t off)
{
	struct rentry *e, *dead = NULL;
	uint64_t charge;
	long n;
	int r;

	if (!etag[0] || size > rc->max_object) {
		atomic_fetch_add(&rc->bypassed, 1);
		return -EFBIG;
	}
	pthread_mutex_lock(&rc->lock);
	e = table_find(rc, key, etag, size);
	if (e && e->state == RE_FAILED &&
	    mono_ns() - e->failed_ns >= SMUXFS_RCACHE_RETRY_MS * 1000000LL) {
		table_remove(rc, e, &dead); /* try again */
		e = NULL;
	}
	if (e) {
		e->refs++;
		while (e->state == RE_FILLING)
			pthread_cond_wait(&rc->filled, &rc->lock);
		if (e->in_table) {
			lru_unlink(rc, e);
			lru_push(rc, e);
		}
	} else {
		charge = (size + RC_BLOCK - 1) / RC_BLOCK * RC_BLOCK;
		e = make_room(rc, charge, &dead)
			    ? entry_new(rc, key, etag, size)
			    : NULL;
		if (!e) {
			pthread_mutex_unlock(&rc->lock);
			reap(rc, dead);
			atomic_fetch_add(&rc->bypassed, 1);
			return -ENOSPC;
		}
		e->charge = charge;
		rc->bytes += charge;
		e->refs = 1; /* ours; the table adds its own */
		table_insert(rc, e);
		rc->misses++;
		pthread_mutex_unlock(&rc->lock);

		r = fill(rc, e);

		pthread_mutex_lock(&rc->lock);
		if (r) {
			e->state = RE_FAILED;
			e->failed_ns = mono_ns();
			rc->bytes -= e->charge;
			e->charge = 0;
			rc->fill_failures++;
		} else {
			e->state = RE_READY;
			rc->fills++;
			rc->fill_bytes += size;
		}
		pthread_cond_broadcast(&rc->filled);
	}
	if (e->state != RE_READY) {
		entry_unref(rc, e, &dead);
		pthread_mutex_unlock(&rc->lock);
		reap(rc, dead);
		atomic_fetch_add(&rc->bypassed, 1);
		return -EIO;
	}
	pthread_mutex_unlock(&rc->lock);

	n = file_read(rc, e, buf, len, off);

	pthread_mutex_lock(&rc->lock);
	if (n >= 0) {
		rc->hits++;
	} else {
		atomic_fetch_add(&rc->bypassed, 1);
		/* damaged or deleted behind our back: fill it again */
		if (e->in_table)
			table_remove(rc, e, &dead);
	}
	entry_unref(rc, e, &dead);
	pthread_mutex_unlock(&rc->lock);
	reap(rc, dead);
	return n;
}

void smuxfs_rcache_forget(struct smuxfs_rcache *rc, const char *key)
{
	struct rentry *e, *next, *dead = NULL;

	if (!rc)
		return;
	pthread_mutex_lock(&rc->lock);
	for (e = rc->buckets[bucket_of(key)]; e; e = next) {
		next = e->hnext;
		if (strcmp(e->key, key) == 0)
			table_remove(rc, e, &dead);
	}
	pthread_mutex_unlock(&rc->lock);
	reap(rc, dead);
}

void smuxfs_rcache_stats(struct smuxfs_rcache *rc,
			 struct smuxfs_rcache_stats *st)
{
	pthread_mutex_lock(&rc->lock);
	st->capacity = rc->capacity;
	st->bytes = rc->bytes;
	st->entries = rc->entries;
	st->hits = rc->hits;
	st->misses = rc->misses;
	st->fills = rc->fills;
	st->fill_failures = rc->fill_failures;
	st->fill_bytes = rc->fill_bytes;
	st->evictions = rc->evictions;
	pthread_mutex_unlock(&rc->lock);
	st->bypassed = atomic_load(&rc->bypassed);
}
