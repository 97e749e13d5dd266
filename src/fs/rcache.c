/* SPDX-License-Identifier: MIT */
/*
 * rcache.c - the on-disk read cache (see rcache.h for the contract).
 *
 * Files: cache_dir/read/HASH-GEN, HASH the SHA-256 of key NUL etag in hex
 * and GEN a counter of this run, so the file of a version dropped while a
 * read or a fetch still uses it never collides with a newer entry of the
 * same version. The file is created sparse at the object's size when the
 * entry is made; fetches (rcache_fetch.c) fill its chunks.
 *
 * Index: a hash table of entries by key, plus an LRU list (head: most
 * recently used) of the entries in the table. An entry is referenced by
 * the table, by every read using it and by every fetch writing it; a
 * dropped entry (evicted or forgotten) leaves the table at once and its
 * file is deleted with its last reference. `bytes` charges every entry not
 * yet deleted (its size rounded up to 4 KiB blocks, reserved when it is
 * made), so the files on disk never exceed the capacity.
 *
 * Locks: rc->lock protects the table, the LRU list, the counters, the
 * read-ahead queue and each entry's state, chunk map, charge, refs and
 * links; the key, etag, size and name of an entry never change. Never
 * held across a backend call, a file read or write, or an unlink (dropped
 * entries are reaped after unlocking).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/rcache.h"
#include "fs/rcache_internal.h"
#include "smux/mux.h"

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
				 const char *etag, uint64_t base, uint64_t size,
				 bool segment)
{
	struct rentry *e = rc->buckets[bucket_of(key)];

	for (; e; e = e->hnext)
		if (e->size == size && e->base == base &&
		    e->segment == segment && strcmp(e->key, key) == 0 &&
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

void smux__rc_unref(struct smuxfs_rcache *rc, struct rentry *e,
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
	smux__rc_unref(rc, e, dead);
}

static bool room_for(const struct smuxfs_rcache *rc, uint64_t need)
{
	return rc->bytes + need <= rc->capacity &&
	       rc->entries < SMUXFS_RCACHE_MAX_ENTRIES;
}

/* An entry that holds chunks read ahead for a stream that is still
 * reading (a read took it within RC_WAITING_NS) and not read yet. */
static bool has_waiting_chunks(const struct rentry *e, int64_t now)
{
	return e->state == RE_READY && e->present > e->nserved &&
	       now - e->used_ns < RC_WAITING_NS;
}

/*
 * Evicts idle entries until @need more bytes and one more entry fit:
 * least recently used first, but first of all those without chunks read
 * ahead that their stream has not read yet. The kernel's READs of a
 * stream arrive out of order: a late one of a segment the stream had
 * left made that segment the most recent, and the next segment evicted
 * the one the stream was in, read ahead and not read yet, which was then
 * fetched again (test_rcache test_unread_readahead_kept). False when
 * they cannot fit (busy entries hold the room).
 */
static bool make_room(struct smuxfs_rcache *rc, uint64_t need,
		      struct rentry **dead)
{
	int64_t now = mono_ns();

	if (need > rc->capacity)
		return false;
	for (int pass = 0; pass < 2 && !room_for(rc, need); pass++) {
		struct rentry *e = rc->lru_tail;

		while (e && !room_for(rc, need)) {
			struct rentry *prev = e->lprev;

			/* in use (a read or a fetch): dropping it would not
			 * free its bytes yet */
			if (e->refs == 1 &&
			    (pass == 1 || !has_waiting_chunks(e, now))) {
				if (e->state == RE_READY)
					rc->evictions++;
				table_remove(rc, e, dead);
			}
			e = prev;
		}
	}
	return room_for(rc, need);
}

void smux__rc_unlink_name(struct smuxfs_rcache *rc, const char *name)
{
	if (unlinkat(rc->dirfd, name, 0) && errno != ENOENT)
		smux_log(LOG_WARNING, "read cache: deleting %s: %s", name,
			 strerror(errno));
}

bool smux__rc_fail(struct smuxfs_rcache *rc, struct rentry *e)
{
	bool unlink_file = e->has_file;

	if (e->state != RE_FAILED) {
		e->state = RE_FAILED;
		e->failed_ns = mono_ns();
		rc->bytes -= e->charge;
		e->charge = 0;
	}
	rc->fill_failures++;
	e->has_file = false;
	pthread_cond_broadcast(&rc->filled);
	return unlink_file;
}

void smux__rc_reap(struct smuxfs_rcache *rc, struct rentry *dead)
{
	while (dead) {
		struct rentry *e = dead;

		dead = e->dnext;
		if (e->has_file)
			smux__rc_unlink_name(rc, e->name);
		free(e->chunk);
		free(e->key);
		free(e->etag);
		free(e);
	}
}

static void entry_free(struct rentry *e)
{
	if (!e)
		return;
	free(e->chunk);
	free(e->key);
	free(e->etag);
	free(e);
}

/* A new entry and its (empty, sparse as chunks land) file. NULL when
 * either cannot be made (logged). With the lock: the one openat of a new
 * empty file is done under it, so a fetch never recreates the file of an
 * entry that failed (fetches open it without O_CREAT). */
static struct rentry *entry_new(struct smuxfs_rcache *rc, const char *key,
				const char *etag, uint64_t base, uint64_t size,
				bool segment)
{
	struct rentry *e = calloc(1, sizeof(*e));
	char hash[RC_HASH_HEX + 1];
	int fd;

	if (!e)
		return NULL;
	e->key = strdup(key);
	e->etag = strdup(etag);
	e->base = base;
	e->size = size;
	e->segment = segment;
	e->nchunks = size ? (size + RC_CHUNK - 1) / RC_CHUNK : 1;
	e->chunk = calloc(e->nchunks, 2);
	e->served = e->chunk ? e->chunk + e->nchunks : NULL;
	if (!e->key || !e->etag || !e->chunk ||
	    name_hash(key, etag, hash) != 0) {
		entry_free(e);
		return NULL;
	}
	e->state = RE_READY;
	snprintf(e->name, sizeof(e->name), "%s-%016llx", hash,
		 (unsigned long long)rc->gen++);
	fd = openat(rc->dirfd, e->name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
		    0600);
	if (fd < 0) {
		smux_log(LOG_WARNING, "read cache: creating %s: %s", e->name,
			 strerror(errno));
		entry_free(e);
		return NULL;
	}
	close(fd);
	e->has_file = true;
	return e;
}

/* Reads from the file of @e, whose chunks in the range are PRESENT.
 * Bytes, or a negative errno. */
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
	/* its chunks are PRESENT: short means the file was damaged */
	n = done == len ? (long)done : -EIO;
	close(fd);
	return n;
}

/* True for a name the cache gives its files: "HASH-GEN" (entry_new). */
static bool own_name(const char *name)
{
	size_t n = strlen(name);

	if (n != RC_HASH_HEX + 1 + 16 || name[RC_HASH_HEX] != '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (i != RC_HASH_HEX && !isdigit((unsigned char)name[i]) &&
		    !(name[i] >= 'a' && name[i] <= 'f'))
			return false;
	return true;
}

/*
 * Deletes the cache files of an earlier run from the directory @dirfd
 * (not closed). Anything else is left as it is (logged): the cache
 * never made it, so it may be someone's (a cache_dir shared with
 * something else).
 */
static int clear_dir(int dirfd)
{
	struct dirent *d;
	unsigned foreign = 0;
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
		if (!own_name(d->d_name))
			foreign++;
		else if (unlinkat(dirfd, d->d_name, 0) < 0)
			smux_log(LOG_WARNING,
				 "read cache: cannot delete %s: %s", d->d_name,
				 strerror(errno));
	}
	closedir(dir);
	if (foreign)
		smux_log(LOG_WARNING,
			 "read cache: %u entr%s in the cache directory not "
			 "made by the cache, left as they are",
			 foreign, foreign == 1 ? "y" : "ies");
	return 0;
}

/*
 * Makes the directory @dirfd this process's: an exclusive flock (no live
 * cache of another mount holds it) while what an earlier run left is
 * deleted, then a shared one held until close. -EBUSY when another live
 * cache has it (a second mount with the same cache_dir): nothing deleted.
 */
static int take_dir(int dirfd)
{
	int r;

	if (flock(dirfd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EBUSY : -errno;
	r = clear_dir(dirfd);
	/* not atomic, and need not be: nothing of ours is in it yet */
	if (!r && flock(dirfd, LOCK_SH) < 0)
		r = -errno;
	return r;
}

/* ---- the interface ---- */

int smuxfs_rcache_discard(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = take_dir(fd);
	close(fd);
	return rc == -EBUSY ? 0 : rc; /* a live mount's: left to it */
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
	r = take_dir(rc->dirfd);
	if (r == -EBUSY) {
		close(rc->dirfd);
		free(rc);
		if (why)
			snprintf(why, whylen,
				 "read cache %s: in use by another mount (give "
				 "each mount its own cache_dir)",
				 dir);
		return r;
	}
	if (r)
		goto out_close;
	rc->capacity = capacity;
	rc->max_object = capacity / SMUXFS_RCACHE_MAX_SHARE;
	/* whole chunks, so an object's chunks and its segments' agree */
	rc->seg_size = rc->max_object < SMUXFS_RCACHE_SEGMENT
			       ? rc->max_object
			       : SMUXFS_RCACHE_SEGMENT;
	rc->seg_size -= rc->seg_size % RC_CHUNK;
	rc->ra_budget = SMUXFS_RCACHE_RA_DEFAULT;
	rc->backend = smux_backend_ref(backend);
	pthread_mutex_init(&rc->lock, NULL);
	pthread_cond_init(&rc->filled, NULL);
	pthread_cond_init(&rc->work, NULL);
	smux_cancel_init(&rc->cancel);
	atomic_init(&rc->bypassed, 0);
	r = smux__rc_workers_start(rc);
	if (r) {
		smuxfs_rcache_free(rc);
		if (why)
			snprintf(why, whylen, "read cache %s: threads: %s", dir,
				 strerror(-r));
		return r;
	}
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

void smuxfs_rcache_set_readahead(struct smuxfs_rcache *rc, uint64_t budget)
{
	/* at most half the cache: the rest is the readers' (read-ahead
	 * larger than the cache pinned segments a reader then found no room
	 * for, and its read went past the cache) */
	if (budget > rc->capacity / 2)
		budget = rc->capacity / 2;
	pthread_mutex_lock(&rc->lock);
	rc->ra_budget = budget;
	pthread_mutex_unlock(&rc->lock);
}

void smuxfs_rcache_free(struct smuxfs_rcache *rc)
{
	struct rentry *dead = NULL;

	if (!rc)
		return;
	smux__rc_workers_stop(rc);
	pthread_mutex_lock(&rc->lock);
	while (rc->lru_head)
		table_remove(rc, rc->lru_head, &dead);
	pthread_mutex_unlock(&rc->lock);
	smux__rc_reap(rc, dead);
	smux_cancel_release(&rc->cancel);
	pthread_cond_destroy(&rc->work);
	pthread_cond_destroy(&rc->filled);
	pthread_mutex_destroy(&rc->lock);
	smux_backend_unref(rc->backend);
	close(rc->dirfd);
	free(rc);
}

/* The entry of the pair, found or made (a reference for the caller), or
 * NULL with *@why the errno to return. With the lock. */
static struct rentry *entry_get(struct smuxfs_rcache *rc, const char *key,
				const char *etag, uint64_t base, uint64_t size,
				bool segment, struct rentry **dead, int *why)
{
	struct rentry *e = table_find(rc, key, etag, base, size, segment);
	uint64_t charge;

	if (e && e->state == RE_FAILED &&
	    mono_ns() - e->failed_ns >= SMUXFS_RCACHE_RETRY_MS * 1000000LL) {
		table_remove(rc, e, dead); /* try again */
		e = NULL;
	}
	if (e) {
		if (e->state == RE_FAILED) {
			*why = -EIO;
			return NULL;
		}
		e->refs++;
		e->used_ns = mono_ns();
		lru_unlink(rc, e);
		lru_push(rc, e);
		return e;
	}
	charge = (size + RC_BLOCK - 1) / RC_BLOCK * RC_BLOCK;
	e = make_room(rc, charge, dead)
		    ? entry_new(rc, key, etag, base, size, segment)
		    : NULL;
	if (!e) {
		*why = -ENOSPC;
		return NULL;
	}
	e->charge = charge;
	rc->bytes += charge;
	e->used_ns = mono_ns();
	e->refs = 1; /* ours; the table adds its own */
	table_insert(rc, e);
	return e;
}

/*
 * Makes chunks [c0, c1] of @e PRESENT: waits for those in flight and
 * fetches the missing ones itself (a run of them per get; a small object
 * whole). With the lock, dropped around fetches. 0, or a negative errno
 * when the entry failed.
 */
static int ensure_chunks(struct smuxfs_rcache *rc, struct rentry *e,
			 uint64_t c0, uint64_t c1)
{
	struct smux_ctx ctx;
	uint64_t c = c0, r0, r1;

	while (c <= c1) {
		if (e->state == RE_FAILED)
			return -EIO;
		if (e->chunk[c] == RC_PRESENT) {
			c++;
			continue;
		}
		if (e->chunk[c] == RC_INFLIGHT) {
			pthread_cond_wait(&rc->filled, &rc->lock);
			continue; /* look at it again */
		}
		/* a run of missing chunks; an object up to RC_SMALL whole */
		r0 = c;
		r1 = c + 1;
		if (e->size <= RC_SMALL) {
			r0 = 0;
			r1 = e->nchunks;
		} else {
			while (r1 <= c1 && e->chunk[r1] == RC_MISSING)
				r1++;
		}
		for (uint64_t i = r0; i < r1; i++)
			if (e->chunk[i] == RC_MISSING)
				e->chunk[i] = RC_INFLIGHT;
		rc->misses++;
		pthread_mutex_unlock(&rc->lock);
		smux_ctx_init(&ctx);
		smux__rc_fetch(rc, e, r0, r1, &ctx);
		pthread_mutex_lock(&rc->lock);
	}
	return 0;
}

/*
 * Reads [@off, @off + @len) of the object @key, all within bytes [@base,
 * @base + @size) of it, from the entry of those bytes (the whole object
 * when !@segment). Bytes, or a negative errno (the caller reads past the
 * cache).
 */
static long read_entry(struct smuxfs_rcache *rc, struct smuxfs_rcache_ra *ra,
		       const char *key, const char *etag, uint64_t base,
		       uint64_t size, bool segment, char *buf, size_t len,
		       uint64_t off)
{
	struct rentry *e, *dead = NULL;
	uint64_t end, c0, c1;
	int r = 0;
	long n;

	pthread_mutex_lock(&rc->lock);
	e = entry_get(rc, key, etag, base, size, segment, &dead, &r);
	if (!e) {
		pthread_mutex_unlock(&rc->lock);
		smux__rc_reap(rc, dead);
		atomic_fetch_add(&rc->bypassed, 1);
		return r;
	}
	off -= base; /* within the entry from here on */
	if (size && off >= size) {
		rc->hits++; /* nothing to read there */
		smux__rc_unref(rc, e, &dead);
		pthread_mutex_unlock(&rc->lock);
		smux__rc_reap(rc, dead);
		return 0;
	}
	end = len && off + len < size ? off + len : size;
	c0 = off / RC_CHUNK;
	c1 = end > off ? (end - 1) / RC_CHUNK : c0;
	if (c1 >= e->nchunks)
		c1 = e->nchunks - 1;
	/* read-ahead first, so its gets run while this read waits (in the
	 * object's offsets: a stream goes on across segments) */
	if (e->segment || e->size > RC_SMALL)
		smux__rc_readahead(rc, e, ra, base + off, end - off);
	r = ensure_chunks(rc, e, c0, c1);
	if (r) {
		smux__rc_unref(rc, e, &dead);
		pthread_mutex_unlock(&rc->lock);
		smux__rc_reap(rc, dead);
		atomic_fetch_add(&rc->bypassed, 1);
		return r;
	}
	pthread_mutex_unlock(&rc->lock);

	n = file_read(rc, e, buf, len, off);

	pthread_mutex_lock(&rc->lock);
	if (n >= 0) {
		rc->hits++;
		for (uint64_t c = c0; c <= c1 && e->state == RE_READY; c++) {
			if (!e->served[c]) {
				e->served[c] = 1;
				e->nserved++;
			}
		}
	} else {
		atomic_fetch_add(&rc->bypassed, 1);
		/* damaged or deleted behind our back: fetch it again */
		if (e->in_table)
			table_remove(rc, e, &dead);
	}
	smux__rc_unref(rc, e, &dead);
	pthread_mutex_unlock(&rc->lock);
	smux__rc_reap(rc, dead);
	return n;
}

long smuxfs_rcache_read_ra(struct smuxfs_rcache *rc,
			   struct smuxfs_rcache_ra *ra, const char *key,
			   const char *etag, uint64_t size, char *buf,
			   size_t len, uint64_t off)
{
	uint64_t seg = rc->seg_size;
	size_t done = 0;

	if (!etag[0] || (size > rc->max_object && !seg)) {
		atomic_fetch_add(&rc->bypassed, 1);
		return -EFBIG;
	}
	if (size <= rc->max_object)
		return read_entry(rc, ra, key, etag, 0, size, false, buf, len,
				  off);
	/* too large to cache whole: segment by segment */
	while (done < len && off + done < size) {
		uint64_t at = off + done, base = at / seg * seg;
		uint64_t slen = size - base < seg ? size - base : seg;
		size_t part = len - done;
		long n;

		if (part > base + slen - at)
			part = (size_t)(base + slen - at);
		n = read_entry(rc, ra, key, etag, base, slen, true, buf + done,
			       part, at);
		if (n < 0)
			return n; /* the caller reads it all past the cache */
		done += (size_t)n;
		if ((size_t)n < part)
			break;
	}
	return (long)done;
}

long smuxfs_rcache_read(struct smuxfs_rcache *rc, const char *key,
			const char *etag, uint64_t size, char *buf, size_t len,
			uint64_t off)
{
	return smuxfs_rcache_read_ra(rc, NULL, key, etag, size, buf, len, off);
}

bool smuxfs_rcache_has(struct smuxfs_rcache *rc, const char *key)
{
	const struct rentry *e;
	bool has = false;

	if (!rc)
		return false;
	pthread_mutex_lock(&rc->lock);
	for (e = rc->buckets[bucket_of(key)]; e && !has; e = e->hnext)
		has = e->in_table && strcmp(e->key, key) == 0;
	pthread_mutex_unlock(&rc->lock);
	return has;
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
	smux__rc_reap(rc, dead);
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
	st->ra_gets = rc->ra_gets;
	st->ra_bytes = rc->ra_bytes;
	st->ra_skipped = rc->ra_skipped;
	st->ra_budget = rc->ra_budget;
	st->ra_inflight_max = rc->ra_inflight_max;
	st->ra_inflight = rc->ra_inflight;
	pthread_mutex_unlock(&rc->lock);
	st->bypassed = atomic_load(&rc->bypassed);
}
