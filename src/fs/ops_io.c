/* SPDX-License-Identifier: MIT */
/*
 * ops_io.c - FUSE operations on open files: open, create, read, write,
 * truncate, fallocate, flush, fsync, release.
 *
 * A handle (struct smuxfs_fh in fi->fh) of a file opened for writing
 * holds a reference on the file's ofile (ofile.c), whose content every
 * handle of that file shares. A clean read-only open holds no ofile: it
 * pins the version it saw at open (etag and size, close-to-open), reads
 * with ranged gets If-Match that etag, and fails with ESTALE rather than
 * stitch two versions together (or, with the read cache on, reads the
 * pinned version's chunks into cache_dir/read, with read-ahead for
 * sequential readers, and serves them from there, rcache.c). Reads on a file with an ofile go to the pending content,
 * never to the read cache. flush (close(2)) and fsync commit, and report
 * failures to the caller: nothing acknowledged is lost.
 *
 * .smux/ files are snapshots taken at open (smuxdir.c) and served here.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs/fs.h"

static struct smuxfs_fh *fh_of(struct fuse_file_info *fi)
{
	return fi ? (struct smuxfs_fh *)fi->fh : NULL;
}

static struct smuxfs_fh *fh_new(const char *key)
{
	struct smuxfs_fh *fh = calloc(1, sizeof(*fh));

	if (!fh)
		return NULL;
	fh->kind = SMUXFS_FH_FILE;
	fh->key = strdup(key);
	if (!fh->key) {
		free(fh);
		return NULL;
	}
	/* (other handles are calloc'ed: a zeroed mutex is an initialised
	 * one in glibc, and smuxfs_fh_free destroys it for every kind) */
	pthread_mutex_init(&fh->pin_lock, NULL);
	pthread_mutex_init(&fh->repin_lock, NULL);
	return fh;
}

/* A write-only handle cannot read its pages back, so its writes skip the
 * page cache (one copy less; notes/fuse-performance-here.md item 5). */
static void write_only_direct(struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) == O_WRONLY)
		fi->direct_io = 1;
}

/*
 * One copy, written in place (smuxfs_ofile_late): every write is stored
 * when it returns and the commit only sets the attributes, so the
 * kernel's FLUSH at each close(2) is spared (two per `echo >> log`: the
 * shell closes a dup too; one per file tar extracts) and the handle
 * commits at its release, which the kernel sends right after the last
 * close without making the caller wait.
 */
static void late_commit(struct smuxfs_fh *fh, struct fuse_file_info *fi)
{
	if (smuxfs_ofile_noflush(fh->of)) {
		fi->noflush = 1;
		fh->late_commit = true;
	}
}

/* A writer's handle offers its file to the kernel (passthrough.c decides
 * at the reply, by the other handles of its node). */
static void offer_passthrough(struct smuxfs *fs, struct smuxfs_fh *fh)
{
	if (!atomic_load(&fs->pt.on))
		return;
	/* the file registered at an earlier open of its writer, or a
	 * descriptor of it to register */
	if (smuxfs_ofile_take_pt_reg(fh->of, &fh->pt_reg))
		fh->pt_fd = -1;
	else
		fh->pt_fd = smuxfs_ofile_passthrough_fd(fh->of);
	fh->pt_has_fd = fh->pt_fd >= 0;
	fh->pt_late = smuxfs_ofile_late(fh->of);
}

/* A handle the kernel wrote through directly (passthrough) may have
 * changed its file: what a write through the daemon would have noted;
 * @commits: the caller commits next (flush, fsync, a late release). */
static void passthrough_wrote(struct smuxfs *fs, struct smuxfs_fh *fh,
			      bool commits)
{
	if (atomic_load(&fh->pt_on) && fh->writable && fh->of) {
		smuxfs_ofile_written_behind(fs, fh->of, commits);
		if (commits)
			atomic_store(&fh->wrote, true);
	}
}

/*
 * The ofile of @key (a reference) when it holds content a reader must
 * read from it, else NULL. One written in place with nothing left to
 * commit does not (smuxfs_ofile_stored): its content is the object
 * itself, which a clean reader reads as a reader of a local file does -
 * and holding the ofile would keep the writer's idea of the size
 * (appends behind the mount not counted) as the reader's, and its writer
 * open, for as long as the reader stays open (tail -f opened while the
 * release of the last `echo >` was still on its way: on a mirror the
 * writer held the key, and a replica's hint for it waited for tail's
 * close, s45-t3).
 */
static struct smuxfs_ofile *pending_of(struct smuxfs *fs, const char *key)
{
	struct smuxfs_ofile *of = smuxfs_ofile_find(fs, key);

	if (of && smuxfs_ofile_stored(of)) {
		smuxfs_ofile_release(fs, of);
		return NULL;
	}
	return of;
}

/* A clean read-only open: pin the version. */
static int open_clean(struct smuxfs *fs, struct smuxfs_fh *fh,
		      struct fuse_file_info *fi)
{
	struct smux_info info;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	smuxfs_ctx(&ctx);
	/* a reader keeps the version open; else (none, too many open, out
	 * of descriptors) pin it by etag */
	/* changes from here on are checked before the reader serves */
	atomic_store(&fh->mutations, atomic_load(&fs->mutations));
	/* the lookup just before (the kernel's, or a listing's) headed it
	 * and nothing changed through the mount since: its version is
	 * pinned without asking again, reads are gets if_match it
	 * (attrcache.c says when this is exact; a version another client
	 * wrote since re-pins at the first read, smuxfs_read) */
	/* ... unless the read cache holds a version of it: a cached copy
	 * may be of a version another client replaced since, so the open
	 * asks which one is current (a cache hit then costs that one
	 * request); a version not cached is fetched if_match it, through
	 * the read cache, and a replaced one re-pins */
	/* The kernel counts attr_timeout from its reply, attrcache.c from
	 * before the request that found the entry (never longer than it
	 * knows): a cat just inside the kernel's time sends no LOOKUP and
	 * its open is the first to miss here. It lists the directory again
	 * as that lookup would have (relist.c: one request for the opens of
	 * all its files), not a HEAD per file. */
	if (!smuxfs_rcache_has(fs->rcache, fh->key) &&
	    (smuxfs_attrcache_pin(fs, fh->key, &info) ||
	     (smuxfs_attrcache_pins(fs) && smuxfs_relist(fs, fh->key) &&
	      smuxfs_attrcache_pin(fs, fh->key, &info)))) {
		atomic_store(&fh->pin_cached, true);
		goto pinned;
	}
	rc = -EMFILE;
	if (atomic_fetch_add(&fs->readers, 1) < fs->max_readers)
		rc = smux_backend_reader_open(fs->root, &ctx, fh->key,
					      &fh->reader, &err);
	if (rc == 0) {
		info = fh->reader->info;
	} else {
		atomic_fetch_sub(&fs->readers, 1);
		if (rc != -EMFILE && rc != -ENFILE &&
		    err.e.code != SMUX_E_NOT_SUPPORTED)
			return smuxfs_errno(&err, "open", fh->key);
		if (smux_backend_head(fs->root, &ctx, fh->key, &info, &err))
			return smuxfs_errno(&err, "head", fh->key);
	}
pinned:
	if (S_ISDIR(info.mode))
		return -EISDIR;
	memcpy(fh->etag, info.etag, sizeof(fh->etag));
	fh->etag[sizeof(fh->etag) - 1] = '\0';
	fh->size = info.size;
	/* a version pinned from attrcache.c is not known current: the
	 * kernel's pages of it are dropped, as the read cache is passed
	 * by until a read of the backend confirmed it (smuxfs_read) */
	fi->keep_cache = smuxfs_etag_check(fs, fh->key, fh->etag) &&
			 !atomic_load(&fh->pin_cached);
	return 0;
}

int smuxfs_open(const char *path, struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	int acc = fi->flags & O_ACCMODE;
	bool trunc = fi->flags & O_TRUNC;
	char key[SMUX_KEY_MAX + 2];
	struct smuxfs_fh *fh;
	int rc;

	if (!path)
		return -ESTALE;
	if (smuxdir_owns(path))
		return smuxdir_open(fs, path, fi); /* checks the flags */
	rc = smuxfs_path_key(fs, path, key, sizeof(key));
	if (rc)
		return rc;
	if (fs->ro && (acc != O_RDONLY || trunc))
		return -EROFS;
	fh = fh_new(key);
	if (!fh)
		return -ENOMEM;
	fh->writable = acc != O_RDONLY;
	/* O_TRUNC is a write: this handle commits it at close */
	atomic_store(&fh->wrote, trunc);
	if (fh->writable || trunc) {
		rc = smuxfs_ofile_open(fs, key, trunc ? SMUXFS_OF_TRUNC : 0, 0,
				       &fh->of);
		fi->keep_cache = 0;
		write_only_direct(fi);
		if (rc == 0) {
			late_commit(fh, fi);
			offer_passthrough(fs, fh);
		}
	} else {
		/* reads see what a writer has pending */
		fh->of = pending_of(fs, key);
		rc = fh->of ? 0 : open_clean(fs, fh, fi);
	}
	if (rc) {
		smuxfs_fh_free(fs, fh);
		return rc;
	}
	if (!fh->of) {
		smuxfs_fh_track(fs, fh); /* renames re-key it */
		/* nothing to upload at close: spare the kernel's FLUSH */
		fi->noflush = 1;
	}
	fi->fh = (uintptr_t)fh;
	return 0;
}

int smuxfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	char key[SMUX_KEY_MAX + 2];
	struct smuxfs_fh *fh;
	int rc;

	if (!path)
		return -ESTALE;
	if (smuxdir_owns(path))
		return -EPERM;
	if (fs->ro)
		return -EROFS;
	if (!S_ISREG(mode) && (mode & S_IFMT))
		return -EPERM;
	rc = smuxfs_path_key(fs, path, key, sizeof(key));
	if (!rc) /* an unlink of the name still queued goes first */
		rc = smuxfs_delq_wait(fs, key, NULL);
	if (rc)
		return rc;
	fh = fh_new(key);
	if (!fh)
		return -ENOMEM;
	fh->writable = true;
	atomic_store(&fh->wrote, true); /* even an empty new file commits */
	/* The kernel looked the name up first; a file that appeared since
	 * (another mount on the same backends) is opened as open(2) would:
	 * O_EXCL fails, O_TRUNC empties it, else it is kept. */
	rc = smuxfs_ofile_open(
		fs, key,
		SMUXFS_OF_CREATE | ((fi->flags & O_EXCL) ? SMUXFS_OF_EXCL : 0) |
			((fi->flags & O_TRUNC) ? SMUXFS_OF_TRUNC : 0),
		mode, &fh->of);
	/* its directory's known names take it (dirnames.c): from here a
	 * lookup finds it open, later committed */
	smuxfs_dirnames_add(fs, key);
	if (rc) {
		smuxfs_fh_free(fs, fh);
		return rc;
	}
	write_only_direct(fi);
	late_commit(fh, fi);
	offer_passthrough(fs, fh);
	fi->fh = (uintptr_t)fh;
	return 0;
}

/*
 * The reader holds the version opened. After a change through the mount
 * (fs->mutations moved), check that @key still has that version: a new
 * one means ESTALE, as a pinned get would say, never old bytes after new
 * ones, decided where the key is read now (smux_reader_current: a head
 * of the mux compared with the pinned token could be another member's
 * token, which never matches). A name gone (unlinked) keeps its open version
 * readable, as on a local filesystem; a failed check reads on (the
 * reader is whole).
 */
static int reader_current(struct smuxfs *fs, struct smuxfs_fh *fh,
			  const char *key)
{
	unsigned long now = atomic_load(&fs->mutations);
	struct smux_error err;
	struct smux_ctx ctx;

	if (atomic_load(&fh->mutations) == now)
		return 0;
	smuxfs_ctx(&ctx);
	if (smux_reader_current(fh->reader, &ctx, key, &err) < 0 &&
	    err.e.code == SMUX_E_PRECONDITION_FAILED)
		return -ESTALE;
	atomic_store(&fh->mutations, now);
	return 0;
}

/* A live reader's file (a local member's descriptor) that a write through
 * the mount replaced rather than changed: a member that cannot write in
 * place (s3, WebDAV) in the mux makes every commit a new file on the
 * local one too, and the descriptor keeps the old one, linked nowhere.
 * One written in place (appends, also behind the mount) is still named. */
static bool live_file_gone(struct smux_reader *r)
{
	struct smux_info now;

	return smux_reader_stat(r, &now) == 0 && now.nlink == 0 &&
	       now.has_times;
}

/*
 * The file of @fh was written through the mount since its version was
 * pinned (fh->repin, set by the commit): the same file, so its reader sees
 * the new content as a reader of a local file sees an append (tail -f),
 * rather than ESTALE. Pins the version there is now; reads go by gets
 * from here on (the reader held the old version). A name unlinked or
 * replaced by a rename is another file: its handle keeps the old pin. A
 * failed head keeps the old pin too (the pinned read then says why).
 * Reads of the handle side by side (the kernel's readahead sends several)
 * wait for a re-pin in progress: one that read the old version's size as
 * the end of the file answered 0 bytes at 1 MiB of a file just truncated
 * up to 3, and the kernel took that for its end (s41-t3).
 */
void smuxfs_fh_repin(struct smuxfs *fs, struct smuxfs_fh *fh, const char *key)
{
	uint64_t written = atomic_load(&fh->repin_id);
	struct smux_info info;
	struct smux_error err;
	struct smux_ctx ctx;

	pthread_mutex_lock(&fh->repin_lock);
	if (!atomic_exchange(&fh->repin, false) || atomic_load(&fh->unlinked))
		goto out;
	/* the file written in place lost its name behind the mount (a
	 * rename over it, an unlink): the name is another file now, and the
	 * reader reads on from the one it opened, as a descriptor of a local
	 * file does, its size as it is now (s44-t1: pinned to the name's new
	 * file, it read that) */
	if (fh->reader && fh->reader->live && written &&
	    written == fh->reader->info.file_id &&
	    smux_reader_stat(fh->reader, &info) == 0 && info.nlink == 0 &&
	    info.has_times) {
		pthread_mutex_lock(&fh->pin_lock);
		fh->size = info.size;
		pthread_mutex_unlock(&fh->pin_lock);
		goto out;
	}
	smuxfs_ctx(&ctx);
	if (smux_backend_head(fs->root, &ctx, key, &info, &err) ||
	    S_ISDIR(info.mode))
		goto out;
	pthread_mutex_lock(&fh->pin_lock);
	memcpy(fh->etag, info.etag, sizeof(fh->etag));
	fh->etag[sizeof(fh->etag) - 1] = '\0';
	fh->size = info.size;
	pthread_mutex_unlock(&fh->pin_lock);
	/* a file replaced through the mount (a temp file renamed over it
	 * by a commit): the name's new file is the one written */
	if (fh->reader && (!fh->reader->live || live_file_gone(fh->reader)))
		atomic_store(&fh->reader_off, true);
	else if (fh->reader && !atomic_load(&fh->replacing))
		/* written in place: a move to another replica looks for
		 * what it is now (s45-t2: tail -f of a mirror's log died
		 * with ESTALE at the first append after a drain of the
		 * first replica); not while a rename over its name is in
		 * flight: the head may have seen the file coming in */
		smux_reader_rebase(fh->reader, &info);
out:
	pthread_mutex_unlock(&fh->repin_lock);
}

/*
 * Whether a read of @fh that began with @replacing renames over its name
 * in flight may have read another file: one was in flight then or is now,
 * or one replaced its name since. A server whose version tokens are size
 * and mtime in seconds names a file renamed over the name within the
 * second, of the same size, as the one replaced: the pinned get cannot
 * tell them apart, so the read is refused (ESTALE) rather than return
 * bytes of either. A live local reader holds its own file.
 */
static bool replaced_meanwhile(struct smuxfs_fh *fh, unsigned replacing)
{
	if (fh->reader && fh->reader->live)
		return false;
	return replacing || atomic_load(&fh->replacing) ||
	       atomic_load(&fh->unlinked);
}

int smuxfs_read(const char *path, char *buf, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = fh_of(fi);
	struct smuxfs_ofile *of;
	struct smux_get_opts opts;
	struct smux_error err;
	struct smux_sink sink;
	struct smux_ctx ctx;
	char key[SMUX_KEY_MAX + 2];
	char etag[SMUX_ETAG_MAX];
	uint64_t psize;
	bool retried = false, live;
	unsigned replacing;
	long n;
	int rc;

	(void)path;
	if (!fh || off < 0)
		return -EBADF;
	if (fh->kind == SMUXFS_FH_VIRTUAL && fh->ev_stream)
		return (int)smuxfs_eventlog_read(fs, fh, buf, size,
						 (uint64_t)off);
	if (fh->kind == SMUXFS_FH_VIRTUAL) {
		if ((uint64_t)off >= fh->len)
			return 0;
		n = (long)(fh->len - (size_t)off);
		if ((size_t)n > size)
			n = (long)size;
		memcpy(buf, fh->data + off, (size_t)n);
		return (int)n;
	}
	if (fh->kind != SMUXFS_FH_FILE)
		return -EISDIR;
	rc = smuxfs_fh_key(fs, fh, key, sizeof(key)); /* follows renames */
	if (rc)
		return rc;
	/* pending content: this handle's, or another handle's opened since
	 * on its name; a handle whose name was replaced (a writer's file
	 * renamed over it) reads its own file, by its node */
	if (fh->of)
		of = fh->of;
	else if (atomic_load(&fh->unlinked))
		of = smuxfs_fnode_ofile(fs, fh);
	else
		of = pending_of(fs, key);
	if (of) {
		n = smuxfs_ofile_read(fs, of, buf, size, (uint64_t)off);
		if (of != fh->of)
			smuxfs_ofile_release(fs, of);
		return (int)n;
	}
	/* its name replaced or unlinked through the mount: nothing by that
	 * name is its file any more, unless a local reader holds it. A get
	 * by the name read the new file - under the old version's token
	 * where a server makes it of size and mtime in seconds (nginx: a
	 * temp file renamed over the name within the second, the same size):
	 * reads stitched from two versions (s41-t3) */
	if (atomic_load(&fh->unlinked) && !(fh->reader && fh->reader->live))
		return -ESTALE;
	replacing = atomic_load(&fh->replacing);
again:
	/* written through the mount since the pin */
	smuxfs_fh_repin(fs, fh, key);
	pthread_mutex_lock(&fh->pin_lock);
	memcpy(etag, fh->etag, sizeof(etag));
	psize = fh->size;
	pthread_mutex_unlock(&fh->pin_lock);
	/* the pinned version, from the read cache when it serves it */
	if (fs->rcache && etag[0]) {
		n = smuxfs_rcache_read_ra(fs->rcache, &fh->ra, key, etag, psize,
					  buf, size, (uint64_t)off);
		if (n >= 0 && replaced_meanwhile(fh, replacing))
			return -ESTALE;
		if (n >= 0) {
			atomic_store(&fh->served, true);
			return (int)n;
		}
	}
	smuxfs_ctx(&ctx);
	/* a live reader (a local file kept open) reads the file as it is,
	 * as a local one would: no version to pin - unless a write through
	 * the mount replaced its file (reader_off, set by repin: a mirror
	 * with a member that cannot write in place puts a new file on the
	 * local one too, and `tail -f` printed the log's first line for
	 * good, s42-t1), but not when its name was unlinked (it is the
	 * open file of a name that is gone, as on a local filesystem) */
	live = fh->reader && fh->reader->live &&
	       (!atomic_load(&fh->reader_off) || atomic_load(&fh->unlinked));
	if (fh->reader &&
	    (live || (!fh->reader->live && !atomic_load(&fh->reader_off) &&
		      reader_current(fs, fh, key) == 0))) {
		n = smux_reader_pread(fh->reader, &ctx, buf, size,
				      (uint64_t)off, &err);
		if (live)
			etag[0] = '\0'; /* no version: the file as it is */
	} else {
		opts = (struct smux_get_opts){
			.offset = (uint64_t)off,
			.length = size,
			.if_match = etag[0] ? etag : NULL,
		};
		smux_sink_buf(&sink, buf, size);
		rc = smux_backend_get(fs->root, &ctx, key, &opts, &sink, NULL,
				      &err);
		n = rc ? rc : (long)sink.written;
	}
	/* A pinned version holds psize bytes: a read of it gets what it
	 * holds there, no fewer (a short answer: the kernel takes a short
	 * read for the end of the file, or fills pages with zeros) and no
	 * more (a server's error page answered as the whole object, the
	 * version's own ETag on it, read as the file: s40-t2) */
	if (n >= 0 && etag[0] &&
	    (uint64_t)n != ((uint64_t)off >= psize
				    ? 0
				    : (psize - (uint64_t)off < size
					       ? psize - (uint64_t)off
					       : size))) {
		struct smux_info cur;

		/* another version under a token that did not tell (a
		 * server whose GETs carry no validator): as a version
		 * that changed, below; else no content of the pinned one */
		if (smux_backend_head(fs->root, &ctx, key, &cur, &err) == 0 &&
		    strcmp(cur.etag, etag) != 0) {
			n = smux_error_set(&err, SMUX_E_PRECONDITION_FAILED,
					   NULL, "read %s: version changed",
					   key);
		} else {
			smux_log(LOG_WARNING,
				 "read %s: %ld bytes at %lld, of a version of "
				 "%llu bytes: not its content",
				 key, n, (long long)off,
				 (unsigned long long)psize);
			return -EIO;
		}
	}
	if (n >= 0 && replaced_meanwhile(fh, replacing))
		return -ESTALE;
	if (n >= 0) {
		atomic_store(&fh->served, true);
		return (int)n;
	}
	if (err.e.code == SMUX_E_PRECONDITION_FAILED) {
		/* a commit through the mount that landed while we read; or
		 * a version pinned from attrcache.c that another client
		 * replaced: nothing was read of it yet, so the handle is as
		 * if opened now */
		if (!retried && !atomic_load(&fh->served) &&
		    atomic_exchange(&fh->pin_cached, false))
			atomic_store(&fh->repin, true);
		if (!retried && atomic_load(&fh->repin)) {
			retried = true;
			goto again;
		}
		smuxfs_errno(&err, "read (version changed)", key);
		return -ESTALE; /* never stitch two versions */
	}
	return smuxfs_errno(&err, "read", key);
}

int smuxfs_write(const char *path, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = fh_of(fi);

	(void)path;
	if (fh && fh->kind == SMUXFS_FH_VIRTUAL && fh->ctl)
		return (int)smuxfs_ctl_write(fs, buf, size);
	if (!fh || fh->kind == SMUXFS_FH_VIRTUAL)
		return -EPERM;
	if (!fh->of || off < 0)
		return -EBADF;
	atomic_store(&fh->wrote, true);
	/* O_APPEND lands at the end as it is now, whatever the kernel
	 * thinks the size is (another program may have appended) */
	return (int)smuxfs_ofile_write(fs, fh->of, buf, size,
				       (fi->flags & O_APPEND) ? SMUX_OFF_APPEND
							      : (uint64_t)off);
}

/* truncate(2) of an open file whose name is gone (through its node, which
 * the kernel still has: /proc/self/fd/N): the pending content of its
 * writer, as ftruncate through that writer. A file only read has nothing
 * of it to change: ESTALE. */
static int truncate_nameless(struct smuxfs *fs, off_t size)
{
	struct smuxfs_ofile *of;
	struct smux_info info;
	int rc;

	rc = smuxfs_fnode_orphan(fs, &of, &info);
	if (rc)
		return rc;
	if (!of)
		return -ESTALE;
	rc = smuxfs_ofile_truncate(fs, of, (uint64_t)size);
	smuxfs_ofile_release(fs, of);
	return rc;
}

int smuxfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = fh_of(fi);
	char key[SMUX_KEY_MAX + 2];
	struct smuxfs_ofile *of;
	int rc;

	if (size < 0)
		return -EINVAL;
	if (fh && fh->kind == SMUXFS_FH_VIRTUAL)
		return fh->ctl ? 0 : -EPERM; /* `echo cmd > .smux/ctl` */
	if (fs->ro)
		return -EROFS;
	if (fh && fh->kind == SMUXFS_FH_FILE && fh->of) {
		atomic_store(&fh->wrote, true);
		return smuxfs_ofile_truncate(fs, fh->of, (uint64_t)size);
	}
	if (fh && fh->kind == SMUXFS_FH_FILE) {
		rc = smuxfs_fh_key(fs, fh, key, sizeof(key));
		if (rc)
			return rc;
	} else if (!path && fi && !fi->fh) {
		/* the channel hook's handle 0 (fnode.c): a truncate(2) of
		 * /proc/self/fd/N of an open file whose name is gone, or by
		 * the name a rename of another name of its file left */
		if (smuxfs_fnode_named_key(fs, key, sizeof(key)) != 0)
			return truncate_nameless(fs, size);
	} else {
		if (!path)
			return -ESTALE;
		if (smuxdir_owns(path))
			return -EPERM;
		rc = smuxfs_path_key(fs, path, key, sizeof(key));
		if (rc)
			return rc;
	}
	/* by path: through the file's ofile (opened for the occasion), then
	 * committed so truncate(2) is visible at once */
	rc = smuxfs_ofile_open(fs, key, size == 0 ? SMUXFS_OF_TRUNC : 0, 0,
			       &of);
	if (rc)
		return rc;
	rc = smuxfs_ofile_truncate(fs, of, (uint64_t)size);
	if (!rc)
		rc = smuxfs_ofile_commit(fs, of, false);
	smuxfs_ofile_release(fs, of);
	return rc;
}

/*
 * fallocate(2) on an open file: its ofile's writer, or its staging file
 * (ofile.c). The kernel has checked the handle's access (and refuses a
 * punch on an O_APPEND one); modes other than the four a writer takes
 * are EOPNOTSUPP (smux_writer_fallocate).
 */
int smuxfs_fallocate(const char *path, int mode, off_t off, off_t len,
		     struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = fh_of(fi);

	(void)path;
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (fs->ro)
		return -EROFS;
	if (!fh || fh->kind != SMUXFS_FH_FILE)
		return -EOPNOTSUPP;
	if (!fh->of)
		return -EBADF;
	atomic_store(&fh->wrote, true);
	return smuxfs_ofile_fallocate(fs, fh->of, mode, (uint64_t)off,
				      (uint64_t)len);
}

int smuxfs_flush(const char *path, struct fuse_file_info *fi)
{
	struct smuxfs_fh *fh = fh_of(fi);
	int rc;

	(void)path;
	/* only a handle that wrote commits: a reader's close publishes
	 * nothing and gets no other handle's error */
	if (fh)
		passthrough_wrote(smuxfs_get(), fh, true);
	if (!fh || !fh->of || !atomic_load(&fh->wrote))
		return 0;
	rc = smuxfs_ofile_commit(smuxfs_get(), fh->of, false);
	/* a replica back from a drain takes the file before close(2)
	 * returns, also when the commit had nothing to do (the writer's
	 * release comes later, unwaited for) */
	if (rc == 0)
		smuxfs_ofile_settle(fh->of);
	return rc;
}

int smuxfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = fh_of(fi);
	struct smuxfs_ofile *of;
	char key[SMUX_KEY_MAX + 2];
	int rc;

	(void)path;
	(void)datasync;
	if (!fh || fh->kind != SMUXFS_FH_FILE || fs->ro)
		return 0;
	passthrough_wrote(fs, fh, true);
	if (fh->of)
		return smuxfs_ofile_commit(fs, fh->of, true);
	/* A read-only handle (sync FILE): what an earlier close committed
	 * may not be durable yet; an ofile's durable commit of the unchanged
	 * content makes sure. A file whose name is gone (unlinked through
	 * the mount or behind it) has nothing left to store: 0, as a local
	 * filesystem answers for an unlinked file. */
	if (atomic_load(&fh->unlinked))
		return 0;
	rc = smuxfs_fh_key(fs, fh, key, sizeof(key));
	if (!rc)
		rc = smuxfs_ofile_open(fs, key, 0, 0, &of);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	rc = smuxfs_ofile_commit(fs, of, true);
	smuxfs_ofile_release(fs, of);
	return rc;
}

int smuxfs_release(const char *path, struct fuse_file_info *fi)
{
	struct smuxfs_fh *fh = fh_of(fi);
	struct smuxfs *fs = smuxfs_get();

	(void)path;
	/* a handle that commits at flush did (mmap'ed pages written since
	 * are the file's already: only the sizes others saw are dropped) */
	if (fh)
		passthrough_wrote(fs, fh, fh->late_commit);
	/* what flush does for the others; a failure is logged there (the
	 * writes it follows were stored and acknowledged already) */
	if (fh && fh->late_commit && fh->of && atomic_load(&fh->wrote))
		(void)smuxfs_ofile_commit(fs, fh->of, false);
	smuxfs_fh_free(fs, fh);
	fi->fh = 0;
	return 0;
}

/* poll(2): the event stream is ready when it has lines past the reader's
 * last read (eventlog.c); every other file is always ready, as on a local
 * filesystem. */
int smuxfs_poll(const char *path, struct fuse_file_info *fi,
		struct fuse_pollhandle *ph, unsigned *reventsp)
{
	struct smuxfs_fh *fh = fh_of(fi);

	(void)path;
	if (fh && fh->kind == SMUXFS_FH_VIRTUAL && fh->ev_stream) {
		*reventsp = smuxfs_eventlog_poll(smuxfs_get(), fh, ph);
		return 0;
	}
	if (ph)
		fuse_pollhandle_destroy(ph);
	*reventsp = POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM;
	return 0;
}
