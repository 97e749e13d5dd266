/* SPDX-License-Identifier: MIT */
/*
 * ofile.c - open files: the table of files open through the mount, their
 * pending content (a backend writer, or a staging file when the root has
 * no writer; fallocate(2) lands in either), its upload at flush/fsync,
 * and the small key -> etag table behind keep_cache (DESIGN section 6).
 *
 * One struct smuxfs_ofile per key, shared by every handle of that key and
 * refcounted, so all handles see one content and reads always see pending
 * writes. Memory stays bounded: content lives in the writer (a temp file
 * for local backends) or in an O_TMPFILE under cache_dir/staging.
 *
 * Locks: fs->otable.lock protects the hash table and each ofile's key,
 * refs, in_table and next; it is never held across a backend call. Each
 * ofile's `lock` serialises its content operations and protects the rest
 * of the ofile; it may be held across backend calls. Order: an ofile's
 * lock may be held while taking the table lock, never the reverse (a new
 * ofile is locked before anyone else can find it), and never two ofile
 * locks at once.
 *
 * Never touches FUSE structures (ops_io.c does).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"
#include "smux/mux.h"

struct smuxfs_ofile {
	/* key: written with both `lock` and the table lock held, read with
	 * either. */
	char *key;
	/* protected by fs->otable.lock */
	unsigned refs;
	bool in_table;
	struct smuxfs_ofile *next;

	pthread_mutex_t lock;  /* serialises content ops; protects below */
	int open_rc;	       /* result of opening: 0 ready, < 0 failed */
	struct smux_writer *w; /* the pending content, or NULL: */
	int fd;		       /* staging file (O_TMPFILE), -1 with a writer */
	/* the inotify watch of w's file (linger.c), begun at its open or
	 * given back with it by a take: ended with it (smuxfs_linger_unwatch,
	 * or by the offer at the last close); -1 none */
	int linger_wd;
	/* w's file registered for passthrough while no handle has it open
	 * (passthrough.c), closed with w; pt_reg_fresh: given back with a
	 * kept writer by this open, whose file it just looked at (a regular
	 * file without set-id bits): the open's handle need not look again */
	struct smuxfs_pt_reg pt_reg;
	bool pt_reg_fresh;
	/* made by this ofile's open (O_CREAT of an absent name): its writer
	 * is not kept at the last close (tar's files are not opened again;
	 * an appended log is, from its second open on) */
	bool created;
	struct smuxfs_stagehash
		sha;   /* of the staging file (fs->stage_sha256) */
	uint64_t size; /* staging: content size */
	uint32_t mode; /* permission bits committed */
	bool mode_set; /* mode meant as given (0000 too), else kept */
	/* mode given by a create or a chmod through this ofile, not only
	 * read at open (late: only a chosen mode is applied at commit, so a
	 * chmod behind our back stands, as on a local file) */
	bool mode_chosen;
	bool own; /* a created file: uid/gid given at its commit */
	/* created here (staged), never committed: the backend holds no
	 * version of it, so getattr asks it nothing */
	bool unstored;
	/* created in place by this ofile, never committed: its first
	 * version is still being written, and what its creator sets on it
	 * (tar: create, write, futimens, fchown, fchmod, close) goes with
	 * that commit. Any other open file written in place gets a chmod,
	 * chown or utimens at once (fold_meta) */
	bool fresh;
	uint32_t uid, gid;
	int64_t mtime_ns; /* reported mtime; committed when mtime_set */
	bool mtime_set;	  /* mtime_ns chosen by utimens */
	/* mtime_ns is the time of the last change of the content through
	 * this ofile: in place, the commit gives it to every replica (a
	 * local file's mtime is its last write's, not its close's) */
	bool mtime_written;
	bool dirty;   /* content or attributes not committed */
	bool inplace; /* w writes the object itself (in place) */
	/* in place on a tree of one copy (SMUX_CAP_ONE_COPY): a write is
	 * stored when it returns and the commit only sets attributes, so
	 * handles commit at their release, not at each close */
	bool late;
	/* deleted (its name unlinked or replaced) while its file kept other
	 * names (hard links): the open files of those look the file up
	 * again after each change through this one (ofile_shared_changed) */
	bool shared;
	bool durable;	  /* everything committed is durable */
	bool deleted;	  /* unlinked or replaced: never commit again */
	uint64_t file_id; /* the stored file's identity last seen, 0 none */
	/* the identity its st_ino showed first while open (0: none yet),
	 * shown for as long as it is open where the tree keeps copies
	 * (smuxfs_ofile_attr.ino_id) */
	uint64_t ino_id;
	/* what the object was at open (its owner, times, links), kept while
	 * it is open so a GETATTR of the open file (every O_APPEND write
	 * asks for the size) costs no backend call; seen_ok false: look it
	 * up (a create, or something changed it through the mount) */
	struct smux_info seen;
	bool seen_ok;
	/* its file had other names at open, or got one since (ln): its
	 * writes go one at a time with those of every such file
	 * (shared_write_lock; here for the struct's packing) */
	bool many;
	bool pin_ino;	   /* smuxfs_pin_ino at its open: ino_id is shown */
	unsigned seen_gen; /* moved by every forget: a lookup racing one
			      does not keep what it saw */
	/* in place, the stored file is the content and others may append to
	 * it behind the mount: its size is the backend's. seen_ns: when seen
	 * was taken (CLOCK_MONOTONIC); size_unknown: an O_APPEND write since,
	 * which landed where only the backend knows */
	int64_t seen_ns;
	bool size_unknown;
	int64_t ctime_ns; /* the last change through this ofile (0 none) */
};

/*
 * Writes (and truncates, fallocates) to a file with several names,
 * whatever the name: one at a time.
 * Each name has its own open file and writer, and a mux writer fans a
 * write out to its replicas on its own: two appends through two names
 * (or two overlapping writes) could reach the replicas in two orders, and
 * mirror replicas ended with the same lines in different orders. Taken
 * inside an ofile's lock, never the other way round; held for the fan-out
 * only (a member call is bounded by backend_timeout).
 */
static pthread_mutex_t shared_write_lock = PTHREAD_MUTEX_INITIALIZER;

/* shared_write_lock for a change through @of (its lock held) when its
 * file has several names. */
static void shared_lock(const struct smuxfs_ofile *of)
{
	if (of->shared || of->many)
		pthread_mutex_lock(&shared_write_lock);
}

static void shared_unlock(const struct smuxfs_ofile *of)
{
	if (of->shared || of->many)
		pthread_mutex_unlock(&shared_write_lock);
}

static uint32_t key_hash(const char *key)
{
	return smux_fnv1a(key, strlen(key));
}

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t smuxfs_unique_mtime(struct smuxfs *fs)
{
	long long now = realtime_ns();
	long long prev = atomic_load(&fs->last_mtime_ns);
	long long next;

	do {
		next = now > prev ? now : prev + 1;
	} while (
		!atomic_compare_exchange_weak(&fs->last_mtime_ns, &prev, next));
	return next;
}

/* ---- the etag table ---- */

bool smuxfs_etag_check(struct smuxfs *fs, const char *key, const char *etag)
{
	struct smuxfs_etags *t = &fs->etags;
	unsigned i = key_hash(key) % SMUXFS_ETAG_SLOTS;
	bool same = false;

	pthread_mutex_lock(&t->lock);
	if (t->slots[i].key && strcmp(t->slots[i].key, key) == 0) {
		same = etag[0] && strcmp(t->slots[i].etag, etag) == 0;
	} else {
		free(t->slots[i].key);
		t->slots[i].key = strdup(key);
	}
	if (t->slots[i].key)
		snprintf(t->slots[i].etag, sizeof(t->slots[i].etag), "%s",
			 etag);
	pthread_mutex_unlock(&t->lock);
	return same;
}

void smuxfs_etag_forget(struct smuxfs *fs, const char *key)
{
	struct smuxfs_etags *t = &fs->etags;
	unsigned i = key_hash(key) % SMUXFS_ETAG_SLOTS;

	atomic_fetch_add(&fs->mutations, 1);
	smuxfs_attrcache_forget(fs, key); /* its attributes: attrcache.c */
	smuxfs_dircache_parent_changed(fs, key);
	/* a change that may have made the name: its directory's known
	 * names take it (dirnames.c) */
	smuxfs_dirnames_add(fs, key);
	pthread_mutex_lock(&t->lock);
	if (t->slots[i].key && strcmp(t->slots[i].key, key) == 0) {
		free(t->slots[i].key);
		t->slots[i].key = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	/* the old versions can never be read again: free their room */
	smuxfs_rcache_forget(fs->rcache, key);
}

/* ---- the table ---- */

int smuxfs_init_tables(struct smuxfs *fs)
{
	memset(&fs->otable, 0, sizeof(fs->otable));
	memset(&fs->etags, 0, sizeof(fs->etags));
	memset(&fs->fnodes, 0, sizeof(fs->fnodes));
	pthread_mutex_init(&fs->otable.lock, NULL);
	pthread_mutex_init(&fs->fnodes.lock, NULL);
	pthread_mutex_init(&fs->etags.lock, NULL);
	smuxfs_absent_init(fs);
	smuxfs_dircache_init(fs);
	smuxfs_attrcache_init(fs);
	smuxfs_dirnames_init(fs);
	atomic_init(&fs->last_mtime_ns, 0);
	return 0;
}

/* Caller holds the table lock. */
static struct smuxfs_ofile *table_lookup(struct smuxfs *fs, const char *key)
{
	struct smuxfs_ofile *of;

	of = fs->otable.buckets[key_hash(key) % SMUXFS_OFILE_BUCKETS];
	for (; of; of = of->next)
		if (strcmp(of->key, key) == 0)
			return of;
	return NULL;
}

/* Caller holds the table lock. */
static void table_insert(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	struct smuxfs_ofile **b =
		&fs->otable.buckets[key_hash(of->key) % SMUXFS_OFILE_BUCKETS];

	of->next = *b;
	*b = of;
	of->in_table = true;
}

/* Caller holds the table lock. */
static void table_remove(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	struct smuxfs_ofile **p =
		&fs->otable.buckets[key_hash(of->key) % SMUXFS_OFILE_BUCKETS];

	if (!of->in_table)
		return;
	for (; *p; p = &(*p)->next) {
		if (*p == of) {
			*p = of->next;
			break;
		}
	}
	of->next = NULL;
	of->in_table = false;
}

/* Closes the writer of @of, if any (the watch linger.c kept on it too). */
static void ofile_writer_close(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	smuxfs_linger_unwatch(fs, of->linger_wd);
	of->linger_wd = -1;
	smuxfs_pt_reg_close(fs, &of->pt_reg);
	smux_writer_close(of->w);
	of->w = NULL;
}

static void ofile_free(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	ofile_writer_close(fs, of);
	if (of->fd >= 0)
		close(of->fd);
	smuxfs_stagehash_free(&of->sha);
	pthread_mutex_destroy(&of->lock);
	free(of->key);
	free(of);
}

struct smuxfs_ofile *smuxfs_ofile_find(struct smuxfs *fs, const char *key)
{
	struct smuxfs_ofile *of;

	pthread_mutex_lock(&fs->otable.lock);
	of = table_lookup(fs, key);
	if (of)
		of->refs++;
	pthread_mutex_unlock(&fs->otable.lock);
	return of;
}

struct smuxfs_ofile *smuxfs_ofile_hold(struct smuxfs *fs,
				       struct smuxfs_ofile *of)
{
	pthread_mutex_lock(&fs->otable.lock);
	of->refs++;
	pthread_mutex_unlock(&fs->otable.lock);
	return of;
}

/*
 * Whether the writer of @of, its last handle closed, may be kept for the
 * next open of its key (linger.c): in place on one copy, open, named, of
 * one name, committed, nothing chosen left to give it. Nobody else holds
 * @of any more.
 */
static bool ofile_may_linger(struct smuxfs_ofile *of)
{
	bool ok;

	pthread_mutex_lock(&of->lock);
	ok = of->w && of->open_rc == 0 && !of->deleted && of->inplace &&
	     of->late && !of->created && !of->dirty && !of->fresh &&
	     !of->unstored && of->seen_ok && !of->own && !of->mode_chosen &&
	     !of->mtime_set;
	pthread_mutex_unlock(&of->lock);
	return ok;
}

/* Drops a reference without the last-chance commit. */
static void ofile_unref(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	bool last;

	pthread_mutex_lock(&fs->otable.lock);
	last = --of->refs == 0;
	if (last)
		table_remove(fs, of);
	pthread_mutex_unlock(&fs->otable.lock);
	if (!last)
		return;
	if (ofile_may_linger(of)) {
		/* the offer takes the watch either way */
		if (smuxfs_linger_offer(fs, of->key, of->w, of->linger_wd,
					&of->pt_reg))
			of->w = NULL; /* kept: the next open takes it */
		of->linger_wd = -1;
	}
	ofile_free(fs, of);
}

/* ---- opening ---- */

/* A staging file: an unnamed file in cache_dir/staging, filled with the
 * object unless truncating. Caller holds of->lock. */
static int ofile_stage(struct smuxfs *fs, struct smuxfs_ofile *of,
		       unsigned flags)
{
	struct smux_error err;
	struct smux_sink sink;
	struct smux_ctx ctx;
	int rc;

	of->fd = openat(fs->staging_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC,
			0600);
	if (of->fd < 0) {
		rc = -errno;
		smux_log(LOG_ERR, "staging file for %s: %s", of->key,
			 strerror(-rc));
		return rc;
	}
	if (flags & SMUXFS_OF_TRUNC) {
		if (fs->stage_sha256) /* written from its start */
			smuxfs_stagehash_start(&of->sha);
		return 0;
	}
	smuxfs_ctx(&ctx);
	smux_sink_fd(&sink, of->fd, 0);
	rc = smux_backend_get(fs->root, &ctx, of->key, NULL, &sink, NULL, &err);
	if (rc)
		return smuxfs_errno(&err, "get (staging)", of->key);
	of->size = sink.written;
	return 0;
}

/* Opens the content of a new ofile. Caller holds of->lock. */
/*
 * A file created in place: the writer saw what it made (the object a head
 * would find now), so getattr of the open file needs no head of its own
 * (tar asks for attributes after each create). Caller holds of->lock.
 */
static void ofile_seen_at_create(struct smuxfs_ofile *of)
{
	if (!of->inplace || !of->w->has_info || !S_ISREG(of->w->info.mode))
		return;
	of->seen = of->w->info;
	of->seen.etag[0] = '\0';
	of->seen_ok = of->seen.nlink <= 1;
	of->seen_ns = smux_now_ns();
	of->file_id = of->seen.file_id;
	if (!of->ino_id)
		of->ino_id = of->file_id;
}

/*
 * The number an open file shows first (its ino_id), where the kernel was
 * told @told for the node and may still show it from its cache (told.c):
 * @told when it is the same file's number on another replica (a drain
 * moved the answering one: the number the kernel had would change under
 * a program that just opened the file - sqlite opened right after the
 * first replica's drain took its database for moved, s45-t3), or when no
 * replica can say otherwise (the one that gave it is out); not when every
 * replica was asked and none has it: a file replaced behind the mount
 * showed the replaced file's number, two files one st_ino (s46-t2).
 * Caller holds of->lock.
 */
static void ofile_told_ino(struct smuxfs *fs, struct smuxfs_ofile *of,
			   uint64_t told)
{
	struct smux_ctx ctx;

	smuxfs_ctx(&ctx);
	if (smux_mux_key_has_id(fs->root, &ctx, of->key, told,
				~SMUXFS_INO_FILE_ID) != 0)
		of->ino_id = told;
}

/* ofile_start's: the create's group is the one the writer's directory
 * gives (smuxfs_writer_dir_group), set once the writer is open */
#define OF_DIR_GROUP 0x100

/* A create's group from its directory when set-group-ID (as
 * smuxfs_caller_owner gives it): said by the writer just opened, else
 * asked of the backends. Caller holds of->lock. */
static void ofile_dir_group(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	uint32_t g = of->w && of->w->has_dir_group
			     ? of->w->dir_group
			     : smuxfs_dir_group(fs, of->key);

	if (of->own && g != SMUX_ID_NONE)
		of->gid = g;
}

/*
 * @a, applied to the file @of writes in place on one copy through the
 * writer's descriptor (no member call: a syscall on an open file, as the
 * kernel's passthrough writes are), and what @of reports follows it.
 * Caller holds of->lock. 0 or a negative errno (-ENOTSUP: the writer
 * cannot; nothing was changed then).
 */
static int ofile_setattr_fd_locked(struct smuxfs_ofile *of,
				   const struct smux_setattr *a)
{
	struct smux_info now;
	int rc;

	rc = smux_writer_setattr(of->w, a);
	if (rc)
		return rc;
	if (a->flags & SMUX_SET_MODE) {
		of->mode = a->mode & 07777;
		of->mode_set = true;
		of->mode_chosen = false; /* given: a later chmod stands */
	}
	if (a->flags & SMUX_SET_OWNER)
		of->own = false; /* given, as a commit gives it */
	if (a->flags & SMUX_SET_MTIME) {
		of->mtime_ns = a->mtime_ns;
		of->mtime_set = false;
	}
	of->ctime_ns = realtime_ns();
	/* what the open file reports: the file as it is now (a chown
	 * clears set-id bits there, as on any local file) */
	if (smux_writer_stat(of->w, &now) != 0)
		return 0;
	of->mode = now.mode & 07777;
	of->mode_set = true;
	if (of->seen_ok) { /* every time, the atime too */
		of->seen = now;
		of->seen.etag[0] = '\0';
		of->seen_ok = now.nlink <= 1;
		of->seen_ns = smux_now_ns();
		of->seen_gen++;
	}
	return 0;
}

/*
 * A file just created in place gets its mode and owner now, as a local
 * create makes the file with them, not at its first commit: nothing is
 * left to give at close, so its closes need no FLUSH on one copy
 * (smuxfs_ofile_noflush: one round trip less per file tar extracts),
 * nothing moves its ctime after close(2) returned (git's index, make),
 * and a crash before the commit does not leave it with the private mode
 * the create made (0600: an sqlite journal on a shield or sticky mount,
 * s41-t2). On several replicas the writer sets it on each descriptor. A
 * failure leaves them to the commit, as before. Caller holds of->lock.
 */
static void ofile_give_now_locked(struct smuxfs_ofile *of)
{
	struct smux_setattr a = {0};
	int rc;

	if (!of->w || !of->inplace)
		return;
	if (of->own) {
		a.flags |= SMUX_SET_OWNER;
		a.uid = of->uid;
		a.gid = of->gid;
	}
	if (of->mode_chosen && of->mode_set) {
		a.flags |= SMUX_SET_MODE;
		a.mode = of->mode;
	}
	/* what the create made already needs no call (root's tar -x: the
	 * daemon's owner is the creator's, and tar creates with 0600, the
	 * mode an in-place create makes): two inode updates less a file */
	if (of->w->has_info && (a.flags & SMUX_SET_OWNER) &&
	    of->w->info.uid == a.uid && of->w->info.gid == a.gid) {
		a.flags &= ~SMUX_SET_OWNER;
		of->own = false;
	}
	if (of->w->has_info && (a.flags & SMUX_SET_MODE) &&
	    (of->w->info.mode & 07777) == (a.mode & 07777)) {
		a.flags &= ~SMUX_SET_MODE;
		of->mode_chosen = false; /* given: a later chmod stands */
	}
	if (!a.flags)
		return;
	rc = ofile_setattr_fd_locked(of, &a);
	if (rc && rc != -ENOTSUP)
		smux_log(LOG_DEBUG,
			 "create of %s: mode and owner left to "
			 "its commit (%s)",
			 of->key, strerror(-rc));
}

static void ofile_changed_locked(struct smuxfs_ofile *of);

/* An existing file opened: the mode to keep and the attributes to report
 * while it is open, from @info (a head's, or what the writer opened).
 * Caller holds of->lock. */
static void ofile_existing(struct smuxfs_ofile *of, unsigned flags,
			   const struct smux_info *info)
{
	of->mode = info->mode & 07777;
	of->mode_set = info->mode != 0;
	of->file_id = info->file_id;
	if (!of->ino_id)
		of->ino_id = of->file_id;
	of->many = info->nlink > 1;
	of->mtime_ns = info->mtime_ns;
	of->dirty = flags & SMUXFS_OF_TRUNC;
	/* a file of several names changes with the others (ln, rm):
	 * looked up every time */
	of->seen = *info;
	of->seen.etag[0] = '\0';
	of->seen_ok = info->nlink <= 1;
	of->seen_ns = smux_now_ns();
	if (flags & SMUXFS_OF_TRUNC) { /* in place: truncated by the open */
		smux_info_set_size(&of->seen, 0);
		/* its times move as a truncate's (a mirror showed the old
		 * mtime until close, and committed it) */
		ofile_changed_locked(of);
	}
}

/* ofile_existing from a head of the key. Caller holds of->lock. */
static int ofile_head(struct smuxfs *fs, struct smuxfs_ofile *of,
		      unsigned flags)
{
	struct smux_info info;
	struct smux_error err;
	struct smux_ctx ctx;

	smuxfs_ctx(&ctx);
	if (smux_backend_head(fs->root, &ctx, of->key, &info, &err))
		return smuxfs_errno(&err, "head", of->key);
	if (S_ISDIR(info.mode))
		return -EISDIR;
	ofile_existing(of, flags, &info);
	return 0;
}

/*
 * An existing file opened without O_TRUNC: the writer its last close left
 * (linger.c), when there is one and it still writes the file in place
 * with a passthrough descriptor; the file as it is now from that
 * descriptor (what other writers changed since). No member call: `echo
 * >> log` in a loop opens its file once. Caller holds of->lock.
 */
static bool ofile_kept(struct smuxfs *fs, struct smuxfs_ofile *of,
		       unsigned flags)
{
	struct smuxfs_pt_reg reg;
	struct smux_writer *w;
	struct smux_info info;
	int wd;

	w = smuxfs_linger_take(fs, of->key, &wd, &reg);
	if (!w)
		return false;
	if (smux_writer_passthrough_fd(w) < 0 ||
	    smux_writer_stat(w, &info) != 0 || !S_ISREG(info.mode)) {
		smuxfs_linger_unwatch(fs, wd);
		smuxfs_pt_reg_close(fs, &reg);
		smux_writer_close(w);
		return false;
	}
	of->w = w;
	of->linger_wd = wd;
	of->pt_reg = reg;
	of->pt_reg_fresh = !(info.mode & (S_ISUID | S_ISGID));
	of->durable = false; /* its earlier closes did not fsync */
	ofile_existing(of, flags, &info);
	return true;
}

/*
 * A create on a tree that stages (object stores) of a name the kernel
 * holds absent, which may be a negative entry older than what another
 * mount of the same bucket made since: unless the name was just found
 * absent by a backend (the LOOKUP before this CREATE: absent.c's note;
 * for O_EXCL and O_TRUNC also its directory's known names, dirnames.c,
 * which that LOOKUP answered from: a name another client made since the
 * listing is taken as absent here as that LOOKUP took it, for at most
 * dir_cache_timeout; O_TRUNC loses nothing to it but the file's mode and
 * owner), one head says what is there. A file there fails O_EXCL with EEXIST and
 * is otherwise opened as open(2) opens an existing file: its mode and
 * owner kept, its content staged (an append lands after it) or emptied
 * (O_TRUNC), *@flags without SMUXFS_OF_CREATE. Else the create starts
 * empty (SMUXFS_OF_TRUNC). Caller holds of->lock.
 */
static int ofile_staged_create(struct smuxfs *fs, struct smuxfs_ofile *of,
			       unsigned *flags)
{
	bool excl = *flags & SMUXFS_OF_EXCL;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	bool known;

	known = smuxfs_absent_take(fs, of->key) ||
		((excl || (*flags & SMUXFS_OF_TRUNC)) &&
		 smuxfs_dirnames_absent(fs, of->key));
	if (!known) {
		smuxfs_ctx(&ctx);
		if (smux_backend_head(fs->root, &ctx, of->key, &info, &err) ==
		    0) {
			if (excl)
				return -EEXIST;
			if (S_ISDIR(info.mode))
				return -EISDIR;
			of->created = false;
			of->mode_chosen = false;
			of->own = false;
			of->unstored = false;
			of->fresh = false;
			*flags &= ~(unsigned)SMUXFS_OF_CREATE;
			ofile_existing(of, *flags, &info);
			return 0;
		}
		if (err.e.code != SMUX_E_KEY_NOT_FOUND)
			return smuxfs_errno(&err, "head", of->key);
	}
	*flags |= SMUXFS_OF_TRUNC;
	return 0;
}

static int ofile_start(struct smuxfs *fs, struct smuxfs_ofile *of,
		       unsigned flags, const struct smux_put_opts *co)
{
	unsigned caps = smux_backend_caps(fs->root);
	struct smux_error err;
	struct smux_ctx ctx;
	bool existing;
	int rc;

	unsigned wflags;

	smuxfs_ctx(&ctx);
	of->durable = true;
	of->inplace = !fs->force_staging && (caps & SMUX_CAP_INPLACE);
	of->late = of->inplace && (caps & SMUX_CAP_ONE_COPY);
	/* an existing file opened in place: the writer's open finds it (or
	 * ENOENT, EISDIR) and says what it is, no head first (issue 8) */
	existing = of->inplace && !(flags & SMUXFS_OF_CREATE) &&
		   (caps & SMUX_CAP_OPEN_EXISTING);
	of->created = flags & SMUXFS_OF_CREATE;
	if (flags & SMUXFS_OF_CREATE) {
		/* the caller's mode (no set-id bits for an unprivileged
		 * one) and owner (smuxfs_caller_owner), given at commit */
		of->mode = co->mode & 07777;
		of->mode_set = true;
		of->mode_chosen = true;
		of->own = co->flags & SMUX_PUT_OWNER;
		of->uid = co->uid;
		of->gid = co->gid;
		of->mtime_ns = realtime_ns();
		of->dirty = true;
		of->unstored = !of->inplace;
		of->fresh = of->inplace;
		/* in place, a create opens what is there (O_CREAT without
		 * O_TRUNC keeps a file that appeared meanwhile); staged, it
		 * is looked for first */
		if (!of->inplace) {
			rc = ofile_staged_create(fs, of, &flags);
			if (rc)
				return rc;
		}
	} else if (!existing) {
		rc = ofile_head(fs, of, flags);
		if (rc)
			return rc;
	}
	if (fs->force_staging)
		return ofile_stage(fs, of, flags);
	if (existing && !(flags & SMUXFS_OF_TRUNC) && ofile_kept(fs, of, flags))
		return 0;
	wflags = (flags & SMUXFS_OF_TRUNC) ? SMUX_WRITER_TRUNC : 0;
	if (of->inplace)
		wflags |=
			SMUX_WRITER_INPLACE |
			((flags & SMUXFS_OF_EXCL) ? SMUX_WRITER_EXCL : 0) |
			((flags & SMUXFS_OF_CREATE) ? SMUX_WRITER_CREATE : 0) |
			(existing ? SMUX_WRITER_EXISTING : 0);
	rc = smux_backend_writer_open(fs->root, &ctx, of->key, wflags, &of->w,
				      &err);
	if (rc == 0) {
		/* an earlier close may have committed without fsync: the
		 * first fsync makes sure (a put, staging's way, is always
		 * durable) */
		of->durable = false;
		/* its name may go from now on: watched from here, so the
		 * writer is kept at its last close only if it did not
		 * (linger.c; a create's is never kept) */
		if (of->late && !(flags & SMUXFS_OF_CREATE))
			of->linger_wd = smuxfs_linger_watch(fs, of->w);
		if ((flags & SMUXFS_OF_CREATE) && of->w->found) {
			/* the name appeared after the kernel saw it absent
			 * (made behind the mount, or by another mount of the
			 * backends): opened as open(2) opens an existing
			 * file, whose mode and owner stay */
			of->fresh = false;
			of->own = false;
			of->mode_chosen = false;
			if (!of->w->has_info)
				return ofile_head(fs, of, flags);
			ofile_existing(of, flags, &of->w->info);
			return 0;
		}
		if (flags & SMUXFS_OF_CREATE)
			ofile_seen_at_create(of);
		if (flags & OF_DIR_GROUP)
			ofile_dir_group(fs, of);
		if (flags & SMUXFS_OF_CREATE)
			ofile_give_now_locked(of);
		if (!existing)
			return 0;
		if (!of->w->has_info)
			return ofile_head(fs, of, flags);
		ofile_existing(of, flags, &of->w->info);
		return 0;
	}
	if (err.e.code != SMUX_E_NOT_SUPPORTED)
		return smuxfs_errno(&err, "open writer", of->key);
	of->inplace = false;
	of->late = false;
	if (existing) {
		rc = ofile_head(fs, of, flags);
		if (rc)
			return rc;
	}
	if (flags & SMUXFS_OF_CREATE)
		flags |= SMUXFS_OF_TRUNC;
	if (flags & OF_DIR_GROUP)
		ofile_dir_group(fs, of);
	return ofile_stage(fs, of, flags);
}

/* A change of the content: dirty, its times moved. Caller holds lock. */
static void ofile_changed_locked(struct smuxfs_ofile *of)
{
	of->dirty = true;
	of->mtime_set = false;
	of->mtime_written = true;
	of->mtime_ns = realtime_ns();
	of->ctime_ns = of->mtime_ns;
}

/* Empties an open ofile (O_TRUNC on an open file). Caller holds lock. */
static int ofile_trunc_locked(struct smuxfs_ofile *of, uint64_t size)
{
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	if (of->w) {
		smuxfs_ctx(&ctx);
		shared_lock(of);
		rc = smux_writer_truncate(of->w, &ctx, size, &err);
		shared_unlock(of);
		if (rc)
			return smuxfs_errno(&err, "truncate", of->key);
		/* in place: the stored size now */
		smux_info_set_size(&of->seen, size);
	} else {
		if (ftruncate(of->fd, (off_t)size) < 0)
			return -errno;
		of->size = size;
		smuxfs_stagehash_truncate(&of->sha, size);
	}
	ofile_changed_locked(of);
	return 0;
}

int smuxfs_ofile_open(struct smuxfs *fs, const char *key, unsigned flags,
		      mode_t mode, struct smuxfs_ofile **out)
{
	struct smux_put_opts co = {0};
	struct smuxfs_ofile *of;
	uint64_t told;
	int rc;

	*out = NULL;
	if (flags & SMUXFS_OF_CREATE) {
		co.mode = smuxfs_caller_mode(fs, mode);
		/* the group a set-group-ID directory gives: the in-place
		 * writer's open says it (no lookup of the directory: issue
		 * 8); else the directory is looked up here, before any lock */
		if (smuxfs_writer_dir_group(fs)) {
			smuxfs_caller_owner_group(fs, SMUX_ID_NONE, &co);
			flags |= OF_DIR_GROUP;
		} else {
			smuxfs_caller_owner(fs, key, false, &co);
		}
	}
	/* the key's size may change from now on, uncommitted */
	atomic_fetch_add(&fs->mutations, 1);
	pthread_mutex_lock(&fs->otable.lock);
	of = table_lookup(fs, key);
	if (of) {
		of->refs++;
		pthread_mutex_unlock(&fs->otable.lock);
		pthread_mutex_lock(&of->lock);
		rc = of->open_rc;
		if (rc == 0 && (flags & SMUXFS_OF_EXCL) && !of->deleted)
			rc = -EEXIST;
		if (rc == 0 && (flags & SMUXFS_OF_TRUNC))
			rc = ofile_trunc_locked(of, 0);
		pthread_mutex_unlock(&of->lock);
		if (rc) {
			ofile_unref(fs, of);
			return rc;
		}
		*out = of;
		return 0;
	}
	of = calloc(1, sizeof(*of));
	if (of)
		of->key = strdup(key);
	if (!of || !of->key) {
		pthread_mutex_unlock(&fs->otable.lock);
		free(of);
		return -ENOMEM;
	}
	of->fd = -1;
	of->linger_wd = -1;
	of->refs = 1;
	/* decided once: a tree that drops to one copy while it is open
	 * (a replica removed) must not change its number then (reviewer) */
	of->pin_ino = smuxfs_pin_ino(fs);
	pthread_mutex_init(&of->lock, NULL);
	/* Locked before anyone can find it, so a concurrent open of the key
	 * waits for the result. Nobody else can hold it yet: a trylock that
	 * cannot fail, and no table -> ofile lock order is created. */
	if (pthread_mutex_trylock(&of->lock) != 0)
		abort();
	table_insert(fs, of);
	pthread_mutex_unlock(&fs->otable.lock);

	told = of->pin_ino ? smuxfs_fnode_told_id() : 0;
	rc = ofile_start(fs, of, flags, &co);
	/* the number its name shows (inomap.c), which another replica's
	 * copy keeps: sqlite compares its descriptor's with its path's. A
	 * truncating open may replace the file on every replica (a staged
	 * write): the name's number starts again, or it would stay with
	 * an identity a replica may give another file (s48-t2) */
	if (rc == 0 && of->pin_ino && (flags & O_TRUNC))
		smuxfs_ino_moved(of->key, NULL);
	if (rc == 0 && of->pin_ino && of->ino_id && !of->many)
		of->ino_id = smuxfs_ino_learn(fs, of->key, of->ino_id, 1);
	/* as told: the identity without the bit st_ino sets (fill_stat) */
	if (rc == 0 && told && told != (of->ino_id & ~SMUXFS_INO_FILE_ID))
		ofile_told_ino(fs, of, told);
	of->open_rc = rc;
	pthread_mutex_unlock(&of->lock);
	if (rc) {
		pthread_mutex_lock(&fs->otable.lock);
		table_remove(fs, of);
		pthread_mutex_unlock(&fs->otable.lock);
		ofile_unref(fs, of);
		return rc;
	}
	*out = of;
	return 0;
}

/* ---- content ---- */

long smuxfs_ofile_read(struct smuxfs *fs, struct smuxfs_ofile *of, char *buf,
		       size_t len, uint64_t off)
{
	struct smux_error err;
	size_t done = 0;
	long n = 0;

	(void)fs;
	pthread_mutex_lock(&of->lock);
	if (of->open_rc) {
		n = of->open_rc;
		goto out;
	}
	if (of->w) {
		n = smux_writer_pread(of->w, buf, len, off, &err);
		if (n < 0)
			n = smuxfs_errno(&err, "read (pending)", of->key);
		goto out;
	}
	while (done < len) {
		ssize_t r = pread(of->fd, buf + done, len - done,
				  (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			n = -errno;
			goto out;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	n = (long)done;
out:
	pthread_mutex_unlock(&of->lock);
	return n;
}

/*
 * A reference on every ofile in the table but @skip's (NULL: none), taken
 * under the table lock and looked at outside it: an ofile's lock comes
 * before the table's. The caller releases each (smuxfs_ofile_release: the
 * last reference commits what is pending, as a release does) and frees
 * the array; NULL with *@n 0 when there is none (or no memory).
 */
static struct smuxfs_ofile **table_hold(struct smuxfs *fs, const char *skip,
					size_t *n)
{
	struct smuxfs_ofile **held = NULL;
	size_t cap = 0;

	*n = 0;
	pthread_mutex_lock(&fs->otable.lock);
	for (unsigned b = 0; b < SMUXFS_OFILE_BUCKETS; b++)
		for (struct smuxfs_ofile *o = fs->otable.buckets[b]; o;
		     o = o->next)
			cap += !skip || strcmp(o->key, skip) != 0;
	held = cap ? calloc(cap, sizeof(struct smuxfs_ofile *)) : NULL;
	for (unsigned b = 0; held && b < SMUXFS_OFILE_BUCKETS; b++)
		for (struct smuxfs_ofile *o = fs->otable.buckets[b];
		     o && *n < cap; o = o->next)
			if (!skip || strcmp(o->key, skip) != 0) {
				o->refs++;
				held[(*n)++] = o;
			}
	pthread_mutex_unlock(&fs->otable.lock);
	return held;
}

/*
 * @of (deleted, shared: its file keeps other names) changed the file in
 * place: the open files of those names drop what they saw of it (its
 * size), as a change through one of them makes the others look it up.
 * Not in the table itself; called without any ofile lock held.
 */
static void ofile_shared_changed(struct smuxfs *fs, uint64_t file_id)
{
	size_t n = 0;
	struct smuxfs_ofile **held = table_hold(fs, NULL, &n);

	for (size_t i = 0; i < n; i++) {
		pthread_mutex_lock(&held[i]->lock);
		if (held[i]->file_id == file_id) {
			held[i]->seen_ok = false;
			held[i]->seen_gen++;
			/* opened after the other names went (its file had
			 * one name then): its writer may keep a copy of the
			 * content (a single target's spool) that the write
			 * just made stale, as after a link */
			if (!held[i]->many) {
				held[i]->many = true;
				if (!held[i]->open_rc)
					smux_writer_shared(held[i]->w);
			}
		}
		pthread_mutex_unlock(&held[i]->lock);
		smuxfs_ofile_release(fs, held[i]);
	}
	free(held);
}

/* After a change through @of (its lock released): see above. */
static void ofile_changed_shared(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	uint64_t id = 0;

	pthread_mutex_lock(&of->lock);
	if (of->shared)
		id = of->file_id;
	pthread_mutex_unlock(&of->lock);
	if (id)
		ofile_shared_changed(fs, id);
}

void smuxfs_ofile_setattr_nameless(struct smuxfs *fs, struct smuxfs_ofile *of,
				   const struct smux_setattr *a)
{
	bool shared = false;
	uint64_t id = 0;
	int rc = 0;

	pthread_mutex_lock(&of->lock);
	if (of->deleted && of->inplace && of->w) {
		rc = smux_writer_setattr(of->w, a);
		shared = of->shared;
		id = of->file_id;
	}
	pthread_mutex_unlock(&of->lock);
	if (rc && rc != -ENOTSUP)
		smux_log(LOG_WARNING, "setattr of %s (its name gone): %s",
			 of->key, strerror(-rc));
	/* its other open names: what they fold into their commits (a
	 * chmod through one of them earlier) must not undo this one */
	if (rc == 0 && shared && id)
		smuxfs_ofile_links_changed(fs, NULL, id, a);
}

/* The size a lookup saw is no size to report any more (the file was
 * written where it ended then, or behind us). Caller holds lock. */
static void ofile_size_unknown_locked(struct smuxfs_ofile *of)
{
	of->size_unknown = true;
	of->seen_gen++;
}

/* The file @of's writer writes in place, when it says (0: unknown). */
static uint64_t written_id(const struct smuxfs_ofile *of)
{
	return of->w && of->w->has_info ? of->w->info.file_id : 0;
}

/* After a write landed: dirty, times moved, and readers of a file stored
 * as it is written (late: no close commits it soon) see it now, as
 * readers of a local file do. Caller holds lock. */
static void ofile_written_locked(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	ofile_changed_locked(of);
	if (of->late)
		smuxfs_readers_written_id(fs, of->key, written_id(of));
}

long smuxfs_ofile_write(struct smuxfs *fs, struct smuxfs_ofile *of,
			const char *buf, size_t len, uint64_t off)
{
	struct smux_error err;
	struct smux_ctx ctx;
	size_t done = 0;
	long n;
	int rc;

	pthread_mutex_lock(&of->lock);
	if (of->open_rc) {
		n = of->open_rc;
		goto out;
	}
	if (of->w) {
		smuxfs_ctx(&ctx);
		shared_lock(of);
		rc = smux_writer_pwrite(of->w, &ctx, buf, len, off, &err);
		shared_unlock(of);
		if (rc) {
			n = smuxfs_errno(&err, "write", of->key);
			goto out;
		}
		/* appended where the file ended then: what a lookup saw
		 * before is no size to report (and a racing one neither) */
		if (off == SMUX_OFF_APPEND && of->inplace)
			ofile_size_unknown_locked(of);
	} else {
		if (off == SMUX_OFF_APPEND)
			off = of->size;
		/* before it lands: a failed write loses the hash */
		smuxfs_stagehash_write(&of->sha, off, buf, len);
		while (done < len) {
			ssize_t r = pwrite(of->fd, buf + done, len - done,
					   (off_t)(off + done));

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				n = -errno;
				smuxfs_stagehash_lost(&of->sha);
				goto out;
			}
			done += (size_t)r;
		}
		if (off + len > of->size)
			of->size = off + len;
	}
	ofile_written_locked(fs, of);
	n = (long)len;
out:
	pthread_mutex_unlock(&of->lock);
	if (n > 0)
		ofile_changed_shared(fs, of);
	return n;
}

int smuxfs_ofile_truncate(struct smuxfs *fs, struct smuxfs_ofile *of,
			  uint64_t size)
{
	int rc;

	pthread_mutex_lock(&of->lock);
	rc = of->open_rc ? of->open_rc : ofile_trunc_locked(of, size);
	pthread_mutex_unlock(&of->lock);
	if (!rc)
		ofile_changed_shared(fs, of);
	return rc;
}

int smuxfs_ofile_fallocate(struct smuxfs *fs, struct smuxfs_ofile *of, int mode,
			   uint64_t off, uint64_t len)
{
	struct smux_error err;
	struct smux_ctx ctx;
	int rc = 0;

	pthread_mutex_lock(&of->lock);
	if (of->open_rc) {
		rc = of->open_rc;
	} else if (of->w) {
		smuxfs_ctx(&ctx);
		shared_lock(of);
		rc = smux_writer_fallocate(of->w, &ctx, mode, off, len, &err);
		shared_unlock(of);
		if (rc)
			rc = smuxfs_errno(&err, "fallocate", of->key);
	} else if (!smux_falloc_mode_ok(mode)) {
		rc = -EOPNOTSUPP; /* as a writer answers (a collapse would
				     also leave of->size behind) */
	} else if (smuxfs_stagehash_lost(&of->sha),
		   fallocate(of->fd, mode, (off_t)off, (off_t)len) < 0) {
		/* the staging file is local: its zeros, holes and size are
		 * what the upload at commit carries */
		rc = -errno;
	} else if (smux_falloc_extends(mode) && off + len > of->size) {
		of->size = off + len;
	}
	if (!rc)
		ofile_changed_locked(of);
	pthread_mutex_unlock(&of->lock);
	if (!rc)
		ofile_changed_shared(fs, of);
	return rc;
}

/* Whether an owner, mode or mtime chosen for @of waits for its commit
 * (a create's, when ofile_give_now_locked could not give them). Caller
 * holds of->lock. */
static bool ofile_given_later_locked(const struct smuxfs_ofile *of)
{
	return of->own || of->mode_chosen || of->mtime_set;
}

/* Commit with of->lock held. */
static int ofile_commit_locked(struct smuxfs *fs, struct smuxfs_ofile *of,
			       bool durable)
{
	struct smux_put_opts opts = {0};
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;
	char msg[512];
	bool changed;
	int rc;

	if (of->open_rc || of->deleted)
		return 0;
	if (!of->dirty && !(durable && !of->durable))
		return 0;
	changed = of->dirty;
	/* in place on one copy, the object has its mode: only a chosen one
	 * is given (a chmod behind the mount while the file is open stands,
	 * as on a local disk); so on several copies when every replica's
	 * writer found the file there (s44-t1: a chmod 600 of the open
	 * file went back to 0644 at its close, on a mirror and a
	 * failover); else every replica gets it (a failover writer that
	 * moved made its file on the next member, a fan-out writer one on
	 * a replica that lacked it); a staged commit replaces the object */
	bool has_mode = of->late ||
			(of->inplace && of->w && of->w->found && !of->unstored);

	if (!has_mode || of->mode_chosen) {
		opts.mode = of->mode;
		if (of->mode_set)
			opts.flags |= SMUX_PUT_MODE;
	}
	if (of->own) {
		opts.flags |= SMUX_PUT_OWNER;
		opts.uid = of->uid;
		opts.gid = of->gid;
	}
	/* a create (the kernel saw the name absent) not committed yet: no
	 * old object of ours to replace (tar's files: no HEAD before each
	 * put on Swift) */
	if (of->unstored)
		opts.flags |= SMUX_PUT_NEW;
	/* a durable-only commit keeps the mtime it committed before; in
	 * place, the file's own (others may have written it since) */
	if (of->mtime_set) { /* utimens chose it: the epoch too (cp -a) */
		opts.mtime_ns = of->mtime_ns;
		opts.flags |= SMUX_PUT_MTIME;
	} else if (of->late) /* its writes set it as they landed */
		opts.mtime_ns = 0;
	else if (of->dirty)
		opts.mtime_ns = of->inplace && of->mtime_written
					? of->mtime_ns
					: smuxfs_unique_mtime(fs);
	else
		opts.mtime_ns = of->inplace ? 0 : of->mtime_ns;
	opts.durable = durable;
	smuxfs_ctx(&ctx);
	if (of->w && of->late && !durable && !smux_put_has_mtime(&opts) &&
	    !(opts.flags & (SMUX_PUT_MODE | SMUX_PUT_OWNER))) {
		/* in place on one copy, its writes stored as they returned
		 * and nothing chosen to set: nothing to ask the member
		 * (`echo >> log`: no member call at its release) */
		rc = 0;
	} else if (of->w && !changed && !of->unstored && !of->fresh &&
		   !ofile_given_later_locked(of)) {
		/* in place, nothing written or chosen since the last commit
		 * (fsync of a descriptor that wrote nothing: `sync FILE`):
		 * only made durable where it is, its mtime kept - a commit
		 * gave every replica one mtime, now (s43-t1) */
		rc = smux_backend_sync(fs->root, &ctx, of->key, &err);
	} else if (of->w) {
		rc = smux_writer_commit(of->w, &ctx, &opts, NULL, &err);
	} else {
		unsigned char sha[32];

		if (smuxfs_stagehash_get(&of->sha, of->size, sha))
			opts.sha256 = sha;
		smux_source_fd(&src, of->fd, 0, of->size);
		rc = smux_backend_put(fs->root, &ctx, of->key, &src, &opts,
				      NULL, &err);
		opts.sha256 = NULL;
	}
	if (rc) {
		/* some member may have it: attributes are asked again */
		smuxfs_attrcache_changed(fs);
		smux_log(LOG_ERR, "commit of %s failed: %s", of->key,
			 smux_error_format(&err, msg, sizeof(msg)));
		return smuxfs_errno_of(&err);
	}
	of->dirty = false;
	of->unstored = false;
	of->fresh = false;
	of->mtime_written = false;
	if (of->own && of->seen_ok) { /* the owner it has now */
		if (of->uid != SMUX_ID_NONE)
			of->seen.uid = of->uid;
		if (of->gid != SMUX_ID_NONE)
			of->seen.gid = of->gid;
		of->seen.has_owner = true;
	}
	/* the commit set mode and times (in place on one copy: only what
	 * was chosen, if anything) */
	if (!of->late || smux_put_has_mtime(&opts) ||
	    (opts.flags & (SMUX_PUT_MODE | SMUX_PUT_OWNER)))
		of->ctime_ns = realtime_ns();
	of->own = false;	 /* given once: a later chown stays */
	of->mode_chosen = false; /* applied: a later chmod stays too */
	of->durable = of->w ? durable || of->durable : true;
	if (smux_put_has_mtime(&opts))
		of->mtime_ns = opts.mtime_ns;
	of->mtime_set = false;
	smuxfs_etag_forget(fs, of->key);
	if (changed)
		smuxfs_readers_written_id(fs, of->key,
					  of->late ? written_id(of) : 0);
	return 0;
}

int smuxfs_ofile_commit(struct smuxfs *fs, struct smuxfs_ofile *of,
			bool durable)
{
	int rc;

	pthread_mutex_lock(&of->lock);
	rc = ofile_commit_locked(fs, of, durable);
	pthread_mutex_unlock(&of->lock);
	return rc;
}

void smuxfs_ofile_settle(struct smuxfs_ofile *of)
{
	struct smux_ctx ctx;

	smuxfs_ctx(&ctx);
	pthread_mutex_lock(&of->lock);
	if (of->open_rc == 0 && of->w && !of->deleted && !of->dirty)
		smux_writer_settle(of->w, &ctx);
	pthread_mutex_unlock(&of->lock);
}

bool smuxfs_ofile_noflush(struct smuxfs_ofile *of)
{
	bool noflush;

	pthread_mutex_lock(&of->lock);
	/* a create's mode and owner not given yet (ofile_give_now_locked
	 * failed) wait for the commit at its close */
	noflush = of->open_rc == 0 && of->late &&
		  !(of->fresh && ofile_given_later_locked(of));
	pthread_mutex_unlock(&of->lock);
	return noflush;
}

int smuxfs_ofile_passthrough_fd(struct smuxfs_ofile *of)
{
	int fd = -1;

	pthread_mutex_lock(&of->lock);
	if (of->open_rc == 0 && of->late && of->w && !of->deleted)
		fd = smux_writer_passthrough_fd(of->w);
	if (fd >= 0)
		fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&of->lock);
	return fd < 0 ? -1 : fd;
}

bool smuxfs_ofile_take_pt_reg(struct smuxfs_ofile *of,
			      struct smuxfs_pt_reg *reg)
{
	bool ok;

	pthread_mutex_lock(&of->lock);
	ok = of->pt_reg.held && of->open_rc == 0 && of->late && of->w &&
	     !of->deleted;
	if (ok && !of->pt_reg_fresh) {
		/* kept while the ofile stayed open: what the file is now */
		struct stat st;
		int fd = smux_writer_passthrough_fd(of->w);

		ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		     !(st.st_mode & (S_ISUID | S_ISGID));
	}
	of->pt_reg_fresh = false;
	if (ok) {
		*reg = of->pt_reg;
		of->pt_reg = (struct smuxfs_pt_reg){0};
	}
	pthread_mutex_unlock(&of->lock);
	return ok;
}

void smuxfs_ofile_park_pt_reg(struct smuxfs *fs, struct smuxfs_ofile *of,
			      struct smuxfs_pt_reg *reg)
{
	struct stat st;
	int fd;

	if (of && reg->held) {
		pthread_mutex_lock(&of->lock);
		/* kept only when it is the file the writer writes (the node
		 * may have registered another writer's descriptor of it),
		 * and not for a create's writer, which is never kept */
		fd = of->open_rc == 0 && of->late && of->w && !of->deleted &&
				     !of->created && !of->pt_reg.held
			     ? smux_writer_passthrough_fd(of->w)
			     : -1;
		if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == reg->dev &&
		    st.st_ino == reg->ino) {
			of->pt_reg = *reg;
			*reg = (struct smuxfs_pt_reg){0};
		}
		pthread_mutex_unlock(&of->lock);
	}
	smuxfs_pt_reg_close(fs, reg);
}

void smuxfs_ofile_written_behind(struct smuxfs *fs, struct smuxfs_ofile *of,
				 bool dirty)
{
	pthread_mutex_lock(&of->lock);
	if (of->open_rc == 0 && of->w) {
		ofile_size_unknown_locked(of);
		if (dirty)
			ofile_written_locked(fs, of);
		else if (of->late)
			smuxfs_readers_written_id(fs, of->key, written_id(of));
	}
	pthread_mutex_unlock(&of->lock);
	ofile_changed_shared(fs, of);
}

bool smuxfs_ofile_stored(struct smuxfs_ofile *of)
{
	bool stored;

	pthread_mutex_lock(&of->lock);
	stored = of->open_rc == 0 && (of->late || (of->inplace && !of->dirty));
	pthread_mutex_unlock(&of->lock);
	return stored;
}

bool smuxfs_ofile_late(struct smuxfs_ofile *of)
{
	bool late;

	pthread_mutex_lock(&of->lock);
	late = of->open_rc == 0 && of->late;
	pthread_mutex_unlock(&of->lock);
	return late;
}

void smuxfs_ofile_release(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	bool last;

	pthread_mutex_lock(&fs->otable.lock);
	last = of->refs == 1;
	pthread_mutex_unlock(&fs->otable.lock);
	if (last) {
		/* flush normally committed it; this is the last chance */
		pthread_mutex_lock(&of->lock);
		if (of->dirty && !of->deleted && !of->open_rc) {
			smux_log(LOG_ERR,
				 "%s closed with unsaved changes; "
				 "committing once more",
				 of->key);
			if (ofile_commit_locked(fs, of, false))
				smux_log(LOG_ERR,
					 "%s: unsaved changes discarded at "
					 "close",
					 of->key);
		}
		pthread_mutex_unlock(&of->lock);
	}
	ofile_unref(fs, of);
}

/* The number the open file shows (smuxfs_ofile_attr.ino_id): a file of
 * several names shows its identity, as its other names do (rsync -H, tar
 * pair names by it). Caller holds of->lock. */
static uint64_t shown_id_locked(const struct smuxfs_ofile *of)
{
	return of->many || of->shared || !of->pin_ino ? 0 : of->ino_id;
}

uint64_t smuxfs_ofile_shown_id(struct smuxfs_ofile *of)
{
	uint64_t id;

	pthread_mutex_lock(&of->lock);
	id = shown_id_locked(of);
	pthread_mutex_unlock(&of->lock);
	return id;
}

int smuxfs_ofile_attr(struct smuxfs_ofile *of, struct smuxfs_ofile_attr *a)
{
	struct smux_info now;
	int rc;

	pthread_mutex_lock(&of->lock);
	rc = of->open_rc;
	a->size = of->size;
	a->mode = of->mode;
	a->mtime_ns = of->mtime_ns;
	a->dirty = of->dirty;
	a->mode_set = of->mode_set;
	a->uid = of->uid;
	a->gid = of->gid;
	a->has_owner = of->own;
	a->unstored = of->unstored;
	a->deleted = of->deleted;
	a->file_id = of->file_id;
	a->ino_id = shown_id_locked(of);
	a->seen_ok = of->seen_ok;
	a->seen_gen = of->seen_gen;
	if (of->seen_ok)
		a->seen = of->seen;
	a->inplace = of->inplace;
	a->seen_ns = of->seen_ns;
	a->size_unknown = of->size_unknown;
	a->ctime_ns = of->ctime_ns;
	/* a file written in place: its size as stored now, which other
	 * descriptors of it (its other names', a writer behind the mount)
	 * change too; once its name is gone, its mode and owner too */
	if (of->w && of->inplace && smux_writer_stat(of->w, &now) == 0) {
		a->size = now.size;
		a->size_stored = true;
		a->has_blocks = now.has_blocks;
		a->blocks = now.blocks;
		/* on one copy its writes may pass the daemon by (passthrough)
		 * and set the file's times as they land: those are its
		 * times, unless a utimens chose one to commit */
		if (of->late && !of->mtime_set) {
			a->mtime_ns = now.mtime_ns;
			if (now.ctime_ns > a->ctime_ns)
				a->ctime_ns = now.ctime_ns;
		}
		if (of->deleted) {
			a->mode = now.mode & 07777;
			a->mode_set = true;
			if (now.has_owner) {
				a->uid = now.uid;
				a->gid = now.gid;
				a->has_owner = true;
			}
		}
	} else if (of->w) { /* the stat gave the size already otherwise */
		a->size = smux_writer_size(of->w);
	}
	pthread_mutex_unlock(&of->lock);
	return rc;
}

bool smuxfs_ofile_open_besides(struct smuxfs *fs, const char *key)
{
	bool other = false;

	pthread_mutex_lock(&fs->otable.lock);
	for (unsigned b = 0; b < SMUXFS_OFILE_BUCKETS && !other; b++)
		for (struct smuxfs_ofile *of = fs->otable.buckets[b];
		     of && !other; of = of->next)
			other = strcmp(of->key, key) != 0;
	pthread_mutex_unlock(&fs->otable.lock);
	return other;
}

void smuxfs_ofile_links_changed(struct smuxfs *fs, const char *key,
				uint64_t file_id, const struct smux_setattr *a)
{
	struct smuxfs_ofile **held;
	size_t n = 0;

	if (!file_id)
		return;
	/* the other open names */
	held = table_hold(fs, key, &n);
	for (size_t i = 0; i < n; i++) {
		struct smuxfs_ofile *of = held[i];

		pthread_mutex_lock(&of->lock);
		if (of->file_id == file_id && !of->deleted) {
			if (a->flags & SMUX_SET_MODE) {
				of->mode = a->mode & 07777;
				of->mode_set = true;
			}
			if (a->flags & SMUX_SET_MTIME)
				of->mtime_ns = a->mtime_ns;
			of->ctime_ns = realtime_ns();
			of->seen_ok = false; /* the owner: looked up again */
			of->seen_gen++;
		}
		pthread_mutex_unlock(&of->lock);
		smuxfs_ofile_release(fs, of);
	}
	free(held);
}

void smuxfs_ofile_forget_seen(struct smuxfs *fs, const char *key)
{
	struct smuxfs_ofile *of = smuxfs_ofile_find(fs, key);

	if (!of)
		return;
	pthread_mutex_lock(&of->lock);
	of->seen_ok = false;
	of->seen_gen++;
	pthread_mutex_unlock(&of->lock);
	ofile_unref(fs, of);
}

void smuxfs_ofile_shared(struct smuxfs *fs, const char *key)
{
	struct smuxfs_ofile *of = smuxfs_ofile_find(fs, key);

	if (!of)
		return;
	pthread_mutex_lock(&of->lock);
	of->many = true;
	if (!of->open_rc)
		smux_writer_shared(of->w); /* NULL (staged): no-op */
	pthread_mutex_unlock(&of->lock);
	ofile_unref(fs, of);
}

void smuxfs_ofile_set_seen(struct smuxfs_ofile *of, unsigned gen,
			   const struct smux_info *info)
{
	pthread_mutex_lock(&of->lock);
	if (!of->deleted && !of->open_rc && of->seen_gen == gen) {
		of->seen = *info;
		of->seen.etag[0] = '\0';
		of->seen_ok = info->nlink <= 1;
		of->seen_ns = smux_now_ns();
		of->size_unknown = false;
	}
	pthread_mutex_unlock(&of->lock);
}

/*
 * Whether a chmod, chown or utimens of a dirty open file waits for its
 * commit (true) or goes to the storage now (false). A staged file's
 * commit replaces the object, so it carries them; a file written in place
 * IS the object, which others (the backend's other clients, a remount
 * after a crash) see as it is: a change there is stored when it returns,
 * as on a local disk (an operator's chmod of a log a service holds open),
 * except on the first version its creator is still writing. Caller holds
 * of->lock.
 */
static bool fold_meta(const struct smuxfs_ofile *of)
{
	return of->dirty && (!of->inplace || of->fresh);
}

bool smuxfs_ofile_set_mode(struct smuxfs_ofile *of, uint32_t mode)
{
	bool fold;

	pthread_mutex_lock(&of->lock);
	fold = fold_meta(of);
	of->mode = mode & 07777;
	of->mode_set = true;
	/* else applied now: a later chmod behind the mount stands */
	if (fold)
		of->mode_chosen = true;
	if (of->dirty)
		of->ctime_ns = realtime_ns();
	pthread_mutex_unlock(&of->lock);
	return fold;
}

bool smuxfs_ofile_set_owner(struct smuxfs_ofile *of, uint32_t uid, uint32_t gid)
{
	bool kept;

	pthread_mutex_lock(&of->lock);
	/* a file created here and never committed (staged: no object yet,
	 * its whole owner is what its commit gives; in place: its creator
	 * still writing it), so tar's fchown before close folds into the
	 * one commit; not a staged rewrite of a stored object (its commit
	 * replaces the object, and an owner half given (chgrp) must keep
	 * the object's other half), nor an older file written in place
	 * (changed at once, fold_meta) */
	kept = of->dirty && (of->inplace ? of->fresh : of->unstored) &&
	       !of->deleted && !of->open_rc;
	if (kept) {
		if (uid != SMUX_ID_NONE || !of->own)
			of->uid = uid;
		if (gid != SMUX_ID_NONE || !of->own)
			of->gid = gid;
		of->own = true;
		of->ctime_ns = realtime_ns();
	}
	pthread_mutex_unlock(&of->lock);
	return kept;
}

void smuxfs_ofile_set_file_id(struct smuxfs_ofile *of, uint64_t file_id)
{
	if (!file_id)
		return;
	pthread_mutex_lock(&of->lock);
	if (!of->deleted) /* a name gone names another file now */
		of->file_id = file_id;
	if (!of->ino_id)
		of->ino_id = file_id;
	pthread_mutex_unlock(&of->lock);
}

bool smuxfs_ofile_set_mtime(struct smuxfs_ofile *of, int64_t mtime_ns)
{
	bool fold;

	pthread_mutex_lock(&of->lock);
	fold = fold_meta(of);
	of->mtime_ns = mtime_ns;
	if (of->dirty) {
		/* the commit's mtime (in place: the same again, so replicas
		 * agree on it) until a write moves it. Not on one copy when
		 * given at once: its writes may pass the daemon by
		 * (passthrough) and move the file's own mtime, which is then
		 * the one to show and keep (a write after a utime) */
		if (fold || !of->late)
			of->mtime_set = true;
		of->ctime_ns = realtime_ns();
	}
	pthread_mutex_unlock(&of->lock);
	return fold;
}

int smuxfs_ofile_setattr_now(struct smuxfs_ofile *of,
			     const struct smux_setattr *a)
{
	int rc = 0;

	pthread_mutex_lock(&of->lock);
	if (of->late && of->inplace && of->fresh && of->w && !of->deleted &&
	    !of->open_rc && !ofile_given_later_locked(of)) {
		rc = ofile_setattr_fd_locked(of, a);
		if (rc == 0)
			rc = 1;
		else if (rc == -ENOTSUP)
			rc = 0;
	}
	pthread_mutex_unlock(&of->lock);
	return rc;
}

int smuxfs_ofile_setattr_open(struct smuxfs_ofile *of,
			      const struct smux_setattr *a)
{
	int rc = 0;

	pthread_mutex_lock(&of->lock);
	if (!of->deleted && !of->open_rc && of->dirty) {
		if (of->w && of->inplace) {
			rc = smux_writer_setattr(of->w, a);
			/* EBUSY: a replica's writer is held by a call given
			 * up on; the others have it */
			rc = rc == 0 || rc == -EBUSY ? 1
			     : rc == -ENOTSUP	     ? 0
						     : rc;
			if (rc == 1 && of->seen_ok &&
			    (a->flags & SMUX_SET_ATIME)) {
				of->seen.atime_ns = a->atime_ns;
				of->seen_gen++;
			}
		}
		/* never put (staged or streamed): its times are its
		 * commit's */
		if (rc == 0 && of->unstored)
			rc = 1;
	}
	pthread_mutex_unlock(&of->lock);
	return rc;
}

/* ---- namespace changes ---- */

static void readers_rekey(struct smuxfs *fs, const char *from, const char *to);
static void readers_unlinked(struct smuxfs *fs, const char *key);
static void readers_replacing(struct smuxfs *fs, const char *key, bool begin);

/* The name of @of is gone (unlinked or replaced by a rename): nothing of
 * it is committed again, and the table forgets it. Its handles keep their
 * content (an in-place writer keeps the inode, as a local file would).
 * Caller holds of->lock. */
static void ofile_orphan_locked(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	pthread_mutex_lock(&fs->otable.lock);
	table_remove(fs, of);
	pthread_mutex_unlock(&fs->otable.lock);
	of->deleted = true;
	of->dirty = false;
}

/*
 * Before @of's name goes (unlink, a rename over it): the mode and owner
 * its creator gave it while writing it in place, folded into its commit
 * (fold_meta), are stored on the file now. The file outlives the name
 * while open, and its other descriptors (a reader's own descriptor on a
 * file backend) show what its storage holds; a deleted ofile commits
 * nothing later. Caller holds of->lock.
 */
static void commit_folded(struct smuxfs *fs, struct smuxfs_ofile *of)
{
	if (of->inplace && of->fresh && of->dirty && !of->deleted &&
	    !of->open_rc && (of->own || of->mode_set))
		(void)ofile_commit_locked(fs, of, false); /* logs a failure */
}

int smuxfs_ofile_unlink(struct smuxfs *fs, const char *key)
{
	struct smuxfs_ofile *of = smuxfs_ofile_find(fs, key);
	struct smux_error err;
	struct smux_info was;
	struct smux_ctx ctx;
	bool was_known;
	int rc;

	/* a name nothing has open is queued, deleted in a batch (delq.c);
	 * an open one keeps what it is through the delete, here */
	if (!of && !smuxfs_fnode_busy(fs, key) &&
	    smuxfs_delq_add(fs, key) == 0) {
		smuxfs_etag_forget(fs, key);
		return 0;
	}

	/* held across the delete: no commit of @key can slip in between,
	 * and the open file is given up only once the delete succeeded */
	if (of) {
		pthread_mutex_lock(&of->lock);
		commit_folded(fs, of);
	}
	smuxfs_ctx(&ctx);
	/* an open descriptor keeps the names its file has left: only a
	 * tree with hard links has other names (and file ids) to learn; on
	 * others the head said nothing gone_init uses (unlink is DELETE
	 * alone, issue 10 item 4) */
	was_known = smuxfs_fnode_busy(fs, key) &&
		    (smux_backend_caps(fs->root) & SMUX_CAP_HARDLINK) &&
		    smux_backend_head(fs->root, &ctx, key, &was, &err) == 0;
	rc = smux_backend_del(fs->root, &ctx, key, &err);
	if (rc)
		rc = smuxfs_errno(&err, "unlink", key);
	else if (of) {
		ofile_orphan_locked(fs, of);
		of->shared = of->inplace && was_known && was.nlink > 1;
	}
	if (of) {
		pthread_mutex_unlock(&of->lock);
		ofile_unref(fs, of);
	}
	smuxfs_etag_forget(fs, key);
	if (rc == 0) {
		readers_unlinked(fs, key);
		smuxfs_fnode_unlinked(fs, key, was_known ? &was : NULL);
	}
	return rc;
}

/* Moves @of to @to in the table and reopens its writer there. Caller
 * holds of->lock; the content was committed. */
static void ofile_rekey_locked(struct smuxfs *fs, struct smuxfs_ofile *of,
			       const char *to)
{
	struct smux_error err;
	struct smux_ctx ctx;
	char *key = strdup(to);
	char msg[512];
	int rc;

	pthread_mutex_lock(&fs->otable.lock);
	if (key) {
		bool listed = of->in_table;

		table_remove(fs, of);
		free(of->key);
		of->key = key;
		if (listed)
			table_insert(fs, of);
	} else {
		table_remove(fs, of);
	}
	pthread_mutex_unlock(&fs->otable.lock);
	if (!key) {
		of->deleted = true;
		of->open_rc = -ENOMEM;
		return;
	}
	if (!of->w || of->deleted)
		return;
	/* A writer belongs to its key: reopen it (lazily, no copy yet). */
	ofile_writer_close(fs, of);
	smuxfs_ctx(&ctx);
	rc = smux_backend_writer_open(fs->root, &ctx, to,
				      of->inplace ? SMUX_WRITER_INPLACE : 0,
				      &of->w, &err);
	if (rc && err.e.code == SMUX_E_NOT_SUPPORTED) {
		/* a writer that only starts empty (s3's): stage the content
		 * just committed under the new name, as an open would */
		of->inplace = false;
		of->late = false;
		rc = ofile_stage(fs, of, 0);
		if (rc)
			of->open_rc = rc;
		return;
	}
	if (rc) {
		smux_log(LOG_ERR, "reopening %s after rename: %s", to,
			 smux_error_format(&err, msg, sizeof(msg)));
		of->open_rc = smuxfs_errno(&err, "open writer", to);
	}
}

static void readers_rekey(struct smuxfs *fs, const char *from, const char *to);

/*
 * A local copy of @from's committed content for a backend without a
 * server-side copy (bunny re-uploads it instead of reading the object,
 * after checking it is the stored version): the staging file of @of (may
 * be NULL) when it holds nothing uncommitted, else @cached (a whole
 * version the read cache held, -1: none; taken); NULL when neither.
 */
static struct smux_local_copy *local_copy_of(struct smuxfs_ofile *of,
					     const char *from, int cached,
					     uint64_t csize)
{
	uint64_t size = csize;
	int fd = -1;

	if (of && of->fd >= 0 && !of->w && !of->dirty && !of->open_rc &&
	    !of->deleted) {
		fd = fcntl(of->fd, F_DUPFD_CLOEXEC, 0);
		size = of->size;
	}
	if (fd >= 0 && cached >= 0)
		close(cached);
	else if (fd < 0)
		fd = cached;
	return fd >= 0 ? smux_local_copy_new(from, fd, size) : NULL;
}

bool smuxfs_ofile_renamed_same(struct smuxfs *fs, const char *from,
			       const char *to)
{
	struct smuxfs_ofile *target = smuxfs_ofile_find(fs, to);
	struct smuxfs_ofile *of = smuxfs_ofile_find(fs, from);
	bool kept = of && target;

	/* one open under @to too (the node the kernel dropped, whose
	 * handles stay nameless: smuxfs_fnode_unnamed): both stay as
	 * they are, never two ofiles of one key */
	if (of && !target) {
		pthread_mutex_lock(&of->lock);
		ofile_rekey_locked(fs, of, to);
		pthread_mutex_unlock(&of->lock);
	}
	if (of)
		ofile_unref(fs, of);
	if (target)
		ofile_unref(fs, target);
	readers_rekey(fs, from, to);
	return kept;
}

int smuxfs_ofile_rename(struct smuxfs *fs, const char *from, const char *to)
{
	struct smuxfs_ofile *of, *target;
	struct smux_error err;
	struct smux_info was;
	struct smux_ctx ctx;
	bool was_known = false;
	uint64_t csize = 0;
	int rc = 0, cached;

	/* whatever is open under the target name is replaced, but only
	 * once the rename succeeded: a failed one leaves its writer whole */
	target = smuxfs_ofile_find(fs, to);
	if (target) { /* before @of's lock is taken */
		pthread_mutex_lock(&target->lock);
		commit_folded(fs, target);
		pthread_mutex_unlock(&target->lock);
	}
	/* before the forget below drops it from the read cache */
	cached = smuxfs_rcache_open_copy(fs->rcache, from, &csize);
	smuxfs_etag_forget(fs, from);
	smuxfs_etag_forget(fs, to);
	of = smuxfs_ofile_find(fs, from);
	if (of == target && of) { /* rename onto itself */
		ofile_unref(fs, target);
		target = NULL;
	}
	if (of) {
		pthread_mutex_lock(&of->lock);
		rc = ofile_commit_locked(fs, of, false);
	}
	if (rc == 0) {
		smuxfs_ctx(&ctx);
		/* an open descriptor of the file replaced keeps the names
		 * its file has left */
		was_known =
			smuxfs_fnode_busy(fs, to) &&
			smux_backend_head(fs->root, &ctx, to, &was, &err) == 0;
		ctx.local = local_copy_of(of, from, cached, csize);
		cached = -1;
		readers_replacing(fs, to, true);
		rc = smux_backend_rename(fs->root, &ctx, from, to, &err);
		smux_local_copy_unref(ctx.local);
		if (rc) {
			readers_replacing(fs, to, false);
			rc = smuxfs_errno(&err, "rename", from);
		}
	}
	if (rc == 0) {
		readers_unlinked(fs, to);
		readers_replacing(fs, to, false); /* unlinked first */
		/* before @of takes the name */
		smuxfs_fnode_unlinked(fs, to, was_known ? &was : NULL);
		readers_rekey(fs, from, to);
	}
	if (of) {
		/* moved first (found first under @to from now on) */
		if (rc == 0)
			ofile_rekey_locked(fs, of, to);
		pthread_mutex_unlock(&of->lock);
		ofile_unref(fs, of);
	}
	if (target) {
		/* never two ofile locks at once */
		if (rc == 0) {
			pthread_mutex_lock(&target->lock);
			ofile_orphan_locked(fs, target);
			target->shared =
				target->inplace && was_known && was.nlink > 1;
			pthread_mutex_unlock(&target->lock);
		}
		ofile_unref(fs, target);
	}
	if (cached >= 0) /* the commit failed: no rename sent */
		close(cached);
	return rc;
}

/*
 * The ofiles whose key starts with @prefix, each with a reference, in a
 * new array (*@out, free()) of *@n. Caller holds the table lock. 0 or
 * -ENOMEM (then what was found is in the array all the same).
 */
static int collect_under(struct smuxfs *fs, const char *prefix,
			 struct smuxfs_ofile ***out, size_t *n)
{
	struct smuxfs_ofile **found = NULL;
	size_t cap = 0, plen = strlen(prefix);

	*n = 0;
	for (unsigned b = 0; b < SMUXFS_OFILE_BUCKETS; b++) {
		for (struct smuxfs_ofile *of = fs->otable.buckets[b]; of;
		     of = of->next) {
			if (strncmp(of->key, prefix, plen) != 0)
				continue;
			if (*n == cap) {
				size_t ncap = cap ? 2 * cap : 16;
				void *f = realloc(
					found,
					ncap * sizeof(struct smuxfs_ofile *));

				if (!f) {
					*out = found;
					return -ENOMEM;
				}
				found = f;
				cap = ncap;
			}
			of->refs++;
			found[(*n)++] = of;
		}
	}
	*out = found;
	return 0;
}

int smuxfs_ofile_commit_under(struct smuxfs *fs, const char *prefix)
{
	struct smuxfs_ofile **found;
	size_t n;
	int rc;

	pthread_mutex_lock(&fs->otable.lock);
	rc = collect_under(fs, prefix, &found, &n);
	pthread_mutex_unlock(&fs->otable.lock);
	for (size_t i = 0; i < n; i++) {
		int r = smuxfs_ofile_commit(fs, found[i], false);

		if (r && !rc)
			rc = r;
		ofile_unref(fs, found[i]);
	}
	free(found);
	return rc;
}

void smuxfs_ofile_rekey_under(struct smuxfs *fs, const char *from,
			      const char *to)
{
	struct smuxfs_ofile **found;
	size_t n, flen = strlen(from);
	char key[SMUX_KEY_MAX + 2];

	pthread_mutex_lock(&fs->otable.lock);
	/* out of memory: the ones not found keep their old name */
	(void)collect_under(fs, from, &found, &n);
	for (struct smuxfs_fh *fh = fs->otable.readers; fh; fh = fh->rnext) {
		char *k;

		if (strncmp(fh->key, from, flen) != 0 ||
		    snprintf(key, sizeof(key), "%s%s", to, fh->key + flen) >=
			    (int)sizeof(key))
			continue;
		k = strdup(key);
		if (!k)
			continue; /* keeps the old name: reads get ENOENT */
		free(fh->key);
		fh->key = k;
		atomic_store(&fh->reader_off, true);
	}
	pthread_mutex_unlock(&fs->otable.lock);
	for (size_t i = 0; i < n; i++) {
		struct smuxfs_ofile *of = found[i];

		pthread_mutex_lock(&of->lock);
		if (strncmp(of->key, from, flen) == 0 &&
		    snprintf(key, sizeof(key), "%s%s", to, of->key + flen) <
			    (int)sizeof(key))
			ofile_rekey_locked(fs, of, key);
		pthread_mutex_unlock(&of->lock);
		ofile_unref(fs, of);
	}
	free(found);
	smuxfs_etag_forget(fs, from);
}

/* One name of an exchange: what is open under it, and its new name. */
struct xside {
	char from[SMUX_KEY_MAX + 2]; /* "a", or "a/" for a directory */
	const char *to;		     /* the other name ("b") */
	size_t flen;
	bool dir;
	struct smuxfs_ofile **found; /* with a reference each */
	size_t n;
};

/* @key (an ofile's or reader's) is on side @x: its key there, else
 * false. */
static bool xside_key(const struct xside *x, const char *key, char *out,
		      size_t cap)
{
	if (x->dir ? strncmp(key, x->from, x->flen) != 0
		   : strcmp(key, x->from) != 0)
		return false;
	if (!x->dir)
		return snprintf(out, cap, "%s", x->to) < (int)cap;
	return snprintf(out, cap, "%s/%s", x->to, key + x->flen) < (int)cap;
}

void smuxfs_ofile_exchanged(struct smuxfs *fs, const char *a, bool a_dir,
			    const char *b, bool b_dir)
{
	struct xside x[2] = {{.to = b, .dir = a_dir}, {.to = a, .dir = b_dir}};
	char key[SMUX_KEY_MAX + 2];

	snprintf(x[0].from, sizeof(x[0].from), a_dir ? "%s/" : "%s", a);
	snprintf(x[1].from, sizeof(x[1].from), b_dir ? "%s/" : "%s", b);
	pthread_mutex_lock(&fs->otable.lock);
	/* both sides found before either moves: nothing moves twice */
	for (int i = 0; i < 2; i++) {
		x[i].flen = strlen(x[i].from);
		if (x[i].dir) {
			/* out of memory: those not found keep their name */
			(void)collect_under(fs, x[i].from, &x[i].found,
					    &x[i].n);
			continue;
		}
		x[i].n = 0;
		x[i].found = malloc(sizeof(struct smuxfs_ofile *));
		if (x[i].found &&
		    (x[i].found[0] = table_lookup(fs, x[i].from)) != NULL) {
			x[i].found[0]->refs++;
			x[i].n = 1;
		}
	}
	for (struct smuxfs_fh *fh = fs->otable.readers; fh; fh = fh->rnext) {
		char *k;

		if (!xside_key(&x[0], fh->key, key, sizeof(key)) &&
		    !xside_key(&x[1], fh->key, key, sizeof(key)))
			continue;
		k = strdup(key);
		if (!k)
			continue; /* keeps the old name: reads get ENOENT */
		free(fh->key);
		fh->key = k;
		atomic_store(&fh->reader_off, true);
	}
	pthread_mutex_unlock(&fs->otable.lock);
	for (int i = 0; i < 2; i++) {
		for (size_t j = 0; j < x[i].n; j++) {
			struct smuxfs_ofile *of = x[i].found[j];

			pthread_mutex_lock(&of->lock);
			if (xside_key(&x[i], of->key, key, sizeof(key)))
				ofile_rekey_locked(fs, of, key);
			pthread_mutex_unlock(&of->lock);
			ofile_unref(fs, of);
		}
		free(x[i].found);
	}
	smuxfs_etag_forget(fs, a);
	smuxfs_etag_forget(fs, b);
}

void smuxfs_ofile_each_in(struct smuxfs *fs, const char *dir,
			  void (*fn)(void *arg, const char *name,
				     const struct smuxfs_ofile_attr *a),
			  void *arg)
{
	struct smuxfs_ofile **found = NULL;
	char **names = NULL;
	size_t n = 0, cap = 0, dlen = strlen(dir);

	pthread_mutex_lock(&fs->otable.lock);
	for (unsigned b = 0; b < SMUXFS_OFILE_BUCKETS; b++) {
		for (struct smuxfs_ofile *of = fs->otable.buckets[b]; of;
		     of = of->next) {
			const char *name = of->key + dlen;

			if (strncmp(of->key, dir, dlen) != 0 || !name[0] ||
			    strchr(name, '/'))
				continue;
			if (n == cap) {
				size_t ncap = cap ? 2 * cap : 16;
				void *f = realloc(
					found,
					ncap * sizeof(struct smuxfs_ofile *));
				void *m;

				if (!f)
					goto out_unlock;
				found = f;
				m = realloc(names, ncap * sizeof(*names));
				if (!m)
					goto out_unlock;
				names = m;
				cap = ncap;
			}
			names[n] = strdup(name);
			if (!names[n])
				goto out_unlock;
			of->refs++;
			found[n++] = of;
		}
	}
out_unlock:
	pthread_mutex_unlock(&fs->otable.lock);
	for (size_t i = 0; i < n; i++) {
		struct smuxfs_ofile_attr a;

		if (smuxfs_ofile_attr(found[i], &a) == 0)
			fn(arg, names[i], &a);
		free(names[i]);
		ofile_unref(fs, found[i]);
	}
	free(names);
	free(found);
}

void smuxfs_release_tables(struct smuxfs *fs)
{
	/* No FUSE request runs any more. Handles the kernel never released
	 * (stopped under an open file: a signal, umount -l) are freed after
	 * the last commits, which tell the clean readers among them
	 * (smuxfs_readers_written walks otable.readers) */
	for (unsigned b = 0; b < SMUXFS_OFILE_BUCKETS; b++) {
		struct smuxfs_ofile *of;

		while ((of = fs->otable.buckets[b])) {
			fs->otable.buckets[b] = of->next;
			of->in_table = false;
			if (of->dirty && !of->deleted && !of->open_rc) {
				smux_log(
					LOG_ERR,
					"%s still open at unmount with unsaved "
					"changes; committing",
					of->key);
				ofile_commit_locked(fs, of, true);
			}
			/* handles may still point at it if the kernel never
			 * released them; they can no longer run */
			ofile_free(fs, of);
		}
	}
	smuxfs_fnode_free_unreleased(fs);
	smuxfs_special_free();
	fs->otable.readers = NULL; /* they were among those handles */
	for (unsigned i = 0; i < SMUXFS_ETAG_SLOTS; i++)
		free(fs->etags.slots[i].key);
	pthread_mutex_destroy(&fs->otable.lock);
	pthread_mutex_destroy(&fs->etags.lock);
	pthread_mutex_destroy(&fs->fnodes.lock);
	smuxfs_absent_release(fs);
	smuxfs_dircache_release(fs);
	smuxfs_attrcache_release(fs);
	smuxfs_dirnames_release(fs);
}

/* ---- handles ---- */

int smuxfs_fh_key(struct smuxfs *fs, struct smuxfs_fh *fh, char *key,
		  size_t cap)
{
	const char *k;
	int rc = 0;

	pthread_mutex_lock(&fs->otable.lock);
	k = fh->of ? fh->of->key : fh->key;
	if (strlen(k) >= cap)
		rc = -ENAMETOOLONG;
	else
		memcpy(key, k, strlen(k) + 1);
	pthread_mutex_unlock(&fs->otable.lock);
	return rc;
}

void smuxfs_fh_track(struct smuxfs *fs, struct smuxfs_fh *fh)
{
	pthread_mutex_lock(&fs->otable.lock);
	fh->rprev = NULL;
	fh->rnext = fs->otable.readers;
	if (fh->rnext)
		fh->rnext->rprev = fh;
	fs->otable.readers = fh;
	fh->tracked = true;
	pthread_mutex_unlock(&fs->otable.lock);
}

/* After a rename of @from to @to: clean read handles follow the file. */
static void readers_rekey(struct smuxfs *fs, const char *from, const char *to)
{
	pthread_mutex_lock(&fs->otable.lock);
	for (struct smuxfs_fh *fh = fs->otable.readers; fh; fh = fh->rnext) {
		char *k;

		if (strcmp(fh->key, from) != 0)
			continue;
		k = strdup(to);
		if (!k)
			continue; /* keeps the old name: reads get ENOENT */
		free(fh->key);
		fh->key = k;
		/* a reader may read by key: pinned gets follow the name */
		atomic_store(&fh->reader_off, true);
	}
	pthread_mutex_unlock(&fs->otable.lock);
}

/* Clean read handles of @key take the version there is now at their next
 * read instead of failing with ESTALE (fs.h). */
void smuxfs_readers_written_id(struct smuxfs *fs, const char *key,
			       uint64_t file_id)
{
	pthread_mutex_lock(&fs->otable.lock);
	for (struct smuxfs_fh *fh = fs->otable.readers; fh; fh = fh->rnext)
		if (strcmp(fh->key, key) == 0) {
			atomic_store(&fh->repin_id, file_id);
			atomic_store(&fh->repin, true);
		}
	pthread_mutex_unlock(&fs->otable.lock);
}

void smuxfs_readers_written(struct smuxfs *fs, const char *key)
{
	smuxfs_readers_written_id(fs, key, 0);
}

/* A rename over @key begins (@begin) or ends: its clean readers' reads
 * meanwhile may get either file (ops_io.c). */
static void readers_replacing(struct smuxfs *fs, const char *key, bool begin)
{
	pthread_mutex_lock(&fs->otable.lock);
	for (struct smuxfs_fh *fh = fs->otable.readers; fh; fh = fh->rnext)
		if (strcmp(fh->key, key) == 0) {
			if (begin)
				atomic_fetch_add(&fh->replacing, 1);
			else if (atomic_load(&fh->replacing) > 0)
				atomic_fetch_sub(&fh->replacing, 1);
		}
	pthread_mutex_unlock(&fs->otable.lock);
}

/* After an unlink of @key (or a rename over it): clean read handles of
 * it read on from what they hold, and say their file has no name. */
static void readers_unlinked(struct smuxfs *fs, const char *key)
{
	pthread_mutex_lock(&fs->otable.lock);
	for (struct smuxfs_fh *fh = fs->otable.readers; fh; fh = fh->rnext)
		if (strcmp(fh->key, key) == 0)
			atomic_store(&fh->unlinked, true);
	pthread_mutex_unlock(&fs->otable.lock);
}

void smuxfs_fh_free(struct smuxfs *fs, struct smuxfs_fh *fh)
{
	if (!fh)
		return;
	smuxfs_eventlog_close(fs, fh);
	smuxfs_fnode_del(fs, fh);
	smuxfs_pt_release(fs, fh);
	if (fh->pt_reg.held) /* its node's: the writer's ofile keeps it */
		smuxfs_ofile_park_pt_reg(fs, fh->of, &fh->pt_reg);
	if (fh->tracked) {
		pthread_mutex_lock(&fs->otable.lock);
		if (fh->rprev)
			fh->rprev->rnext = fh->rnext;
		else
			fs->otable.readers = fh->rnext;
		if (fh->rnext)
			fh->rnext->rprev = fh->rprev;
		pthread_mutex_unlock(&fs->otable.lock);
	}
	if (fh->of)
		smuxfs_ofile_release(fs, fh->of);
	if (fh->reader) {
		smux_reader_close(fh->reader);
		atomic_fetch_sub(&fs->readers, 1);
	}
	free(fh->key);
	free(fh->path);
	free(fh->data);
	pthread_mutex_destroy(&fh->pin_lock);
	pthread_mutex_destroy(&fh->repin_lock);
	free(fh);
}
