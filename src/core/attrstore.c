/* SPDX-License-Identifier: MIT */
/*
 * attrstore.c - the persistent attribute cache of an object-store backend
 * (attrstore.h): for each key, what the backend last knew of the object -
 * etag, size, the server's Last-Modified (when known), mode (type and
 * permission bits: a symlink is S_IFLNK), owner, stored mtime - so that a
 * listing entry that still matches gets its attributes here instead of
 * from a HEAD (an S3 or Swift listing gives size, Last-Modified and ETag,
 * not the metadata that holds mode, owner, mtime and the symlink marker).
 *
 * What fills it is only what the backend itself saw: the metadata its PUT
 * (or multipart complete) sent with the ETag the server answered, a copy's
 * or setattr's result, a HEAD's answer. A DELETE drops the key. It never
 * holds a credential; keys are bound as blobs (any bytes S3 allows).
 *
 * When it is right. An entry is used for a listing entry only when the
 * etag and size match, and the Last-Modified too once one was recorded
 * (a PUT's answer has none: the first listing after it records it; a
 * HEAD's is to the second, so it is compared to the second until a
 * listing gives a finer one). What another client can do, and what shows:
 *  - overwrite with other content: the etag (and mostly the size)
 *    differs: no match, the entry is HEADed (and the HEAD refreshes it);
 *  - change only the metadata (s3fs's chmod/chown/utimens: a CopyObject
 *    in place with REPLACE metadata; a re-PUT of the same bytes with
 *    other metadata): the etag stays, Last-Modified moves: no match;
 *  - delete: the listing no longer shows the key; its entry stays until
 *    evicted or the key is written again (harmless: only a listing
 *    entry can select it, and that entry must match);
 *  - delete and re-create with the same bytes and other metadata:
 *    Last-Modified moves: no match.
 * Not seen: a metadata-only change by another client between our own
 * PUT and the first listing after it (no Last-Modified recorded yet),
 * or within the same second as the recorded Last-Modified where the
 * server keeps only seconds (AWS lists ".000Z"). Those show the old mode
 * or owner until the key is HEADed or written again, as s3fs's or
 * rclone's own caches would.
 *
 * Lost or corrupt: a cache. No fsync (SQLite in WAL mode, synchronous
 * off): a crash may lose the last entries, never make one wrong
 * (each put is one transaction). A file that SQLite does not take, or
 * that fails later with SQLITE_CORRUPT/NOTADB, is removed and made anew;
 * when even that fails the store goes on in memory.
 *
 * Bounded: at most max entries; a put over it evicts the entries written
 * longest ago down to nine tenths of max.
 *
 * Threads: one SQLite connection (opened without SQLite's own mutex),
 * every use under st->lock; nothing else is shared. No lock of a caller
 * is taken here.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/attrstore.h"

#define STORE_VERSION 1

struct smux__attrstore {
	pthread_mutex_t lock; /* protects everything below */
	sqlite3 *db;	      /* NULL: broken beyond repair (no memory) */
	char *path;	      /* NULL: memory only */
	char *identity;
	size_t max;
	size_t count; /* entries, counted from above (exact after evict) */
	int64_t seq;  /* the last put's order */
	sqlite3_stmt *get, *put, *del, *setlm;
};

static const char *const schema =
	"CREATE TABLE IF NOT EXISTS attrs ("
	" key BLOB PRIMARY KEY, etag TEXT NOT NULL, size INTEGER NOT NULL,"
	" lastmod INTEGER NOT NULL, mode INTEGER NOT NULL,"
	" uid INTEGER NOT NULL, gid INTEGER NOT NULL,"
	" has_owner INTEGER NOT NULL, mtime INTEGER NOT NULL,"
	" seq INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS attrs_seq ON attrs(seq);"
	"CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);";

int smux__mkdirs(const char *dir)
{
	char *p = strdup(dir);
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s && rc == 0; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) && errno != EEXIST)
			rc = -errno;
		*s = '/';
	}
	if (rc == 0 && mkdir(p, 0700) && errno != EEXIST)
		rc = -errno;
	free(p);
	return rc;
}

static void stmts_finalize(struct smux__attrstore *st)
{
	sqlite3_finalize(st->get);
	sqlite3_finalize(st->put);
	sqlite3_finalize(st->del);
	sqlite3_finalize(st->setlm);
	st->get = st->put = st->del = st->setlm = NULL;
}

static void db_close(struct smux__attrstore *st)
{
	stmts_finalize(st);
	sqlite3_close(st->db);
	st->db = NULL;
}

/* One-row query of an integer; @dflt when there is no row or an error. */
static int64_t query_i64(sqlite3 *db, const char *sql, int64_t dflt)
{
	sqlite3_stmt *q;
	int64_t v = dflt;

	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
		return dflt;
	if (sqlite3_step(q) == SQLITE_ROW &&
	    sqlite3_column_type(q, 0) != SQLITE_NULL)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return v;
}

/* Empties the store when it was written for another identity (or has
 * none yet) and records ours. SQLite's code. */
static int identity_check(struct smux__attrstore *st)
{
	sqlite3_stmt *q;
	bool same = false;
	int rc;

	rc = sqlite3_prepare_v2(st->db, "SELECT v FROM meta WHERE k='identity'",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		const unsigned char *v = sqlite3_column_text(q, 0);

		same = v && strcmp((const char *)v, st->identity) == 0;
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_OK;
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_OK || same)
		return rc;
	rc = sqlite3_exec(st->db, "DELETE FROM attrs", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_prepare_v2(st->db,
				"INSERT OR REPLACE INTO meta VALUES "
				"('identity', ?)",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(q, 1, st->identity, -1, SQLITE_STATIC);
	rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK
					    : sqlite3_errcode(st->db);
	sqlite3_finalize(q);
	return rc;
}

/* Opens @path (":memory:" for none) as a store of ours. SQLite's code. */
static int db_open(struct smux__attrstore *st, const char *path)
{
	int rc, ver;

	rc = sqlite3_open_v2(path, &st->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(st->db, 200); /* another mount of the same */
	/* the first statement reads the file: garbage fails here */
	rc = sqlite3_exec(st->db,
			  "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;",
			  NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		goto fail;
	ver = (int)query_i64(st->db, "PRAGMA user_version", -1);
	if (ver != 0 && ver != STORE_VERSION) {
		/* another layout: start over */
		rc = sqlite3_exec(st->db,
				  "DROP TABLE IF EXISTS attrs;"
				  "DROP TABLE IF EXISTS meta;",
				  NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			goto fail;
	}
	rc = sqlite3_exec(st->db, schema, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(st->db, "PRAGMA user_version=1", NULL, NULL,
				  NULL);
	if (rc == SQLITE_OK)
		rc = identity_check(st);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(
			st->db,
			"SELECT etag, size, lastmod, mode, uid, gid, "
			"has_owner, mtime FROM attrs WHERE key = ?",
			-1, &st->get, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(st->db,
					"INSERT OR REPLACE INTO attrs VALUES "
					"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
					-1, &st->put, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(st->db,
					"DELETE FROM attrs WHERE key = ?", -1,
					&st->del, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(st->db,
					"UPDATE attrs SET lastmod = ? "
					"WHERE key = ? AND etag = ?",
					-1, &st->setlm, NULL);
	if (rc != SQLITE_OK)
		goto fail;
	st->count = (size_t)query_i64(st->db, "SELECT count(*) FROM attrs", 0);
	st->seq = query_i64(st->db, "SELECT max(seq) FROM attrs", 0);
	return SQLITE_OK;
fail:
	if (rc == SQLITE_OK)
		rc = SQLITE_ERROR;
	db_close(st);
	return rc;
}

static void unlink_store(const char *path)
{
	char aux[4096];

	unlink(path);
	snprintf(aux, sizeof(aux), "%s-wal", path);
	unlink(aux);
	snprintf(aux, sizeof(aux), "%s-shm", path);
	unlink(aux);
}

/* (Re)opens the store: its file, else a new file in its place, else
 * memory. st->lock held or not shared yet. */
static void store_open(struct smux__attrstore *st, bool fresh)
{
	if (st->path) {
		if (!fresh && db_open(st, st->path) == SQLITE_OK)
			return;
		/* not a store of ours, or corrupt: a cache, made anew */
		unlink_store(st->path);
		if (db_open(st, st->path) == SQLITE_OK)
			return;
		free(st->path);
		st->path = NULL;
	}
	if (db_open(st, ":memory:") != SQLITE_OK)
		st->db = NULL;
}

/* After an error of @rc: a store found corrupt is made anew. */
static void store_error(struct smux__attrstore *st, int rc)
{
	rc &= 0xff;
	if (rc != SQLITE_CORRUPT && rc != SQLITE_NOTADB)
		return;
	db_close(st);
	store_open(st, true);
}

struct smux__attrstore *
smux__attrstore_open(const char *path, const char *identity, size_t max_entries)
{
	struct smux__attrstore *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->identity = strdup(identity ? identity : "");
	st->path = path ? strdup(path) : NULL;
	if (!st->identity || (path && !st->path)) {
		free(st->identity);
		free(st->path);
		free(st);
		return NULL;
	}
	st->max = max_entries ? max_entries : SMUX_ATTRSTORE_MAX_DEFAULT;
	if (st->path) {
		char *dir = strdup(st->path), *slash;
		int fd;

		slash = dir ? strrchr(dir, '/') : NULL;
		if (slash && slash != dir) {
			*slash = '\0';
			smux__mkdirs(dir);
		}
		free(dir);
		/* object names are the users' business: 0600 */
		fd = open(st->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
	}
	pthread_mutex_init(&st->lock, NULL);
	store_open(st, false);
	return st;
}

void smux__attrstore_free(struct smux__attrstore *st)
{
	if (!st)
		return;
	db_close(st);
	pthread_mutex_destroy(&st->lock);
	free(st->path);
	free(st->identity);
	free(st);
}

/* Over the bound: drops the entries written longest ago, down to nine
 * tenths of it. st->lock held. */
static void evict(struct smux__attrstore *st)
{
	sqlite3_stmt *q;
	size_t keep = st->max - st->max / 10;
	int rc;

	st->count = (size_t)query_i64(st->db, "SELECT count(*) FROM attrs", 0);
	if (st->count <= st->max)
		return;
	rc = sqlite3_prepare_v2(st->db,
				"DELETE FROM attrs WHERE seq <= (SELECT seq "
				"FROM attrs ORDER BY seq LIMIT 1 OFFSET ?)",
				-1, &q, NULL);
	if (rc != SQLITE_OK) {
		store_error(st, rc);
		return;
	}
	sqlite3_bind_int64(q, 1, (int64_t)(st->count - keep - 1));
	rc = sqlite3_step(q);
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE)
		store_error(st, rc);
	else
		st->count = (size_t)query_i64(st->db,
					      "SELECT count(*) FROM attrs", 0);
}

/* Runs a prepared statement that returns no row, and resets it. */
static void step_done(struct smux__attrstore *st, sqlite3_stmt *q)
{
	int rc = sqlite3_step(q);

	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_DONE)
		store_error(st, rc);
}

static bool keepable(const char *key, const struct smux_info *info)
{
	size_t n = strlen(key);

	return n && key[n - 1] != '/' && info->etag[0] &&
	       (info->mode & S_IFMT) && !S_ISDIR(info->mode);
}

void smux__attrstore_forget(struct smux__attrstore *st, const char *key)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	if (st->db) {
		sqlite3_bind_blob(st->del, 1, key, (int)strlen(key),
				  SQLITE_STATIC);
		step_done(st, st->del);
	}
	pthread_mutex_unlock(&st->lock);
}

void smux__attrstore_put(struct smux__attrstore *st, const char *key,
			 const struct smux_info *info, int64_t lastmod_ns)
{
	sqlite3_stmt *q;

	if (!st)
		return;
	if (!keepable(key, info)) {
		smux__attrstore_forget(st, key);
		return;
	}
	pthread_mutex_lock(&st->lock);
	if (!st->db)
		goto out;
	q = st->put;
	sqlite3_bind_blob(q, 1, key, (int)strlen(key), SQLITE_STATIC);
	sqlite3_bind_text(q, 2, info->etag, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 3, (int64_t)info->size);
	sqlite3_bind_int64(q, 4, lastmod_ns > 0 ? lastmod_ns : 0);
	sqlite3_bind_int64(q, 5, info->mode);
	sqlite3_bind_int64(q, 6, info->uid);
	sqlite3_bind_int64(q, 7, info->gid);
	sqlite3_bind_int(q, 8, info->has_owner);
	sqlite3_bind_int64(q, 9, info->mtime_ns);
	sqlite3_bind_int64(q, 10, ++st->seq);
	step_done(st, q);
	if (st->db && ++st->count > st->max)
		evict(st);
out:
	pthread_mutex_unlock(&st->lock);
}

/* Whether a recorded Last-Modified @rec (0: none) matches a listing's
 * @seen: exactly, or to the second when @rec has no finer part. */
static bool lastmod_match(int64_t rec, int64_t seen)
{
	if (!rec)
		return true;
	if (rec % 1000000000 == 0)
		return seen - seen % 1000000000 == rec;
	return rec == seen;
}

bool smux__attrstore_fill(struct smux__attrstore *st, const char *key,
			  struct smux_info *info)
{
	const unsigned char *etag;
	int64_t seen = info->mtime_ns, lastmod = 0;
	bool hit = false;
	sqlite3_stmt *q;
	int rc;

	if (!st || !info->etag[0])
		return false;
	pthread_mutex_lock(&st->lock);
	if (!st->db)
		goto out;
	q = st->get;
	sqlite3_bind_blob(q, 1, key, (int)strlen(key), SQLITE_STATIC);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		etag = sqlite3_column_text(q, 0);
		lastmod = sqlite3_column_int64(q, 2);
		hit = etag && strcmp((const char *)etag, info->etag) == 0 &&
		      (uint64_t)sqlite3_column_int64(q, 1) == info->size &&
		      lastmod_match(lastmod, seen);
	}
	if (hit) {
		info->mode = (uint32_t)sqlite3_column_int64(q, 3);
		info->uid = (uint32_t)sqlite3_column_int64(q, 4);
		info->gid = (uint32_t)sqlite3_column_int64(q, 5);
		info->has_owner = sqlite3_column_int(q, 6) != 0;
		info->mtime_ns = sqlite3_column_int64(q, 7);
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		store_error(st, rc);
		goto out;
	}
	if (hit && seen > 0 && lastmod != seen) {
		/* the first listing after a put records its Last-Modified;
		 * a finer one replaces a HEAD's seconds */
		sqlite3_bind_int64(st->setlm, 1, seen);
		sqlite3_bind_blob(st->setlm, 2, key, (int)strlen(key),
				  SQLITE_STATIC);
		sqlite3_bind_text(st->setlm, 3, info->etag, -1, SQLITE_STATIC);
		step_done(st, st->setlm);
	}
out:
	pthread_mutex_unlock(&st->lock);
	return hit;
}

size_t smux__attrstore_count(struct smux__attrstore *st)
{
	size_t n = 0;

	if (!st)
		return 0;
	pthread_mutex_lock(&st->lock);
	if (st->db)
		n = (size_t)query_i64(st->db, "SELECT count(*) FROM attrs", 0);
	pthread_mutex_unlock(&st->lock);
	return n;
}

bool smux__attrstore_persistent(struct smux__attrstore *st)
{
	bool p;

	if (!st)
		return false;
	pthread_mutex_lock(&st->lock);
	p = st->path != NULL && st->db != NULL;
	pthread_mutex_unlock(&st->lock);
	return p;
}
