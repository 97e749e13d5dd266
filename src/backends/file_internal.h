/* SPDX-License-Identifier: MIT */
/*
 * backends/file_internal.h - what the file backend's modules share:
 * file.c (the instance and the object operations), file_path.c (keys to
 * paths, containment), file_tmp.c (temp files, copying), file_list.c and
 * file_writer.c. Not a public header.
 *
 * Containment rule every module follows: a path is only ever opened with
 * smux__file_open() (openat2 beneath the root or beneath a directory fd
 * that itself came from it, with symlinks, magic links and mount crossings
 * refused), and a dirfd+name call (fstatat, renameat, unlinkat, mkdirat)
 * only ever names one component, never "." or "..", relative to such a
 * directory fd, without following a trailing symlink.
 */
#ifndef SMUX_BACKENDS_FILE_INTERNAL_H
#define SMUX_BACKENDS_FILE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "smux/backend.h"
#include "smux/file.h"

/*
 * Temp files: ".smux-tmp." + 16 hex digits, always inside the work folder
 * SMUX__FILE_WORK_DIR at the root (one per backend root, created by
 * smux_file_new, swept of an earlier run's leftovers there, never listed;
 * the key of that name at the root level is INVALID_KEY). A user file
 * elsewhere whose name starts like a temp file is an ordinary file.
 */
#define SMUX__FILE_WORK_DIR	  ".smuxfs-tmp"
#define SMUX__FILE_WORK_DIR_LEN	  (sizeof(SMUX__FILE_WORK_DIR) - 1)
#define SMUX__FILE_TMP_PREFIX	  ".smux-tmp."
#define SMUX__FILE_TMP_PREFIX_LEN (sizeof(SMUX__FILE_TMP_PREFIX) - 1)
#define SMUX__FILE_TMP_NAME_MAX	  (SMUX__FILE_TMP_PREFIX_LEN + 16 + 1)

/* Permission bits of a put without opts->mode, and of new directories. */
#define SMUX__FILE_DEFAULT_MODE 0644
/* The mtime argument of smux__file_tmp_seal and smux__file_put_special
 * that means "a unique now": 0 is a time like any other (the epoch). */
#define SMUX__FILE_MTIME_NOW INT64_MIN
#define SMUX__FILE_DIR_MODE  0755

/* A file backend instance. Immutable after smux_file_new(). */
/* What is mounted below a root (file_mounts.c). */
struct smux__file_mounts {
	char *root;			 /* the root's path in this namespace */
	int fd;				 /* /proc/self/mountinfo, -1: none */
	pthread_mutex_t lock;		 /* one re-read at a time */
	atomic_bool below;		 /* a mount point below root */
	atomic_int_least64_t checked_ns; /* last look (CLOCK_MONOTONIC) */
};

struct smux__file {
	struct smux_backend base; /* first: downcast by smux__file_from */
	int root_fd;		  /* O_PATH|O_DIRECTORY on the root */
	int work_fd;		  /* the work folder, O_RDONLY, flock'd
				   * LOCK_SH; -1 when it could not be made
				   * (a read-only root) */
	int work_errno;		  /* why work_fd is -1 */
	unsigned swept;		  /* leftovers removed at open */
	bool no_fsync;
	bool read_only;	 /* smux_file_opts.read_only */
	bool local_disk; /* the root is on a local disk file system */
	struct smux__file_mounts mounts; /* local_disk only */
	/*
	 * Directory fsyncs (smux__file_sync_dir). Every call that may add,
	 * remove or rename an entry of any directory bumps ns_gen once it
	 * is done (smux__file_ns_changed). The last directory fsynced and
	 * ns_gen as it was before that fsync began (under dsync_lock) let
	 * another fsync of the same directory with no change since be
	 * skipped: sqlite fsyncs the directory right after the first fsync
	 * of its new journal did (a cache flush each, 0.1 ms here). These
	 * are bookkeeping, changed through the const pointers that the
	 * path helpers take.
	 */
	atomic_uint_least64_t ns_gen;
	pthread_mutex_t dsync_lock;
	bool dsync_valid;		  /* protected by dsync_lock */
	dev_t dsync_dev;		  /* protected by dsync_lock */
	ino_t dsync_ino;		  /* protected by dsync_lock */
	uint64_t dsync_gen;		  /* protected by dsync_lock */
	atomic_uint_least64_t dir_fsyncs; /* done (tests read it) */
};

/* file_mounts.c: whether a file system is mounted below @fb's root, as
 * /proc/self/mountinfo said when last read (again when it changed, at
 * most every 100 ms); true when it cannot be read. Open (root_fd set,
 * mounts.fd -1 and mounts.lock initialised by the caller): 0 or -errno;
 * close frees what open made, also after a failed one, and the lock. */
int smux__file_mounts_open(struct smux__file *fb);
bool smux__file_mounts_below(struct smux__file *fb);
void smux__file_mounts_close(struct smux__file *fb);

/* After a call that may have changed the entries of a directory (create,
 * unlink, rename, link, mkdir, rmdir, symlink, mknod), failed or not. */
void smux__file_ns_changed(const struct smux__file *fb);

/* fsync(2) of the directory @dirfd, skipped when it is the directory this
 * backend fsynced last and nothing changed any directory since that fsync
 * began. 0, or -1 with errno set. */
int smux__file_sync_dir(const struct smux__file *fb, int dirfd);

/* Directory fsyncs this backend did (smux__file_sync_dir), for tests;
 * 0 for a backend of another kind. */
uint64_t smux__file_dir_fsyncs(struct smux_backend *b);

/* A temp file being filled in the work folder, to be published into
 * @dirfd. Both fds are borrowed. */
struct smux__file_tmp {
	int workfd; /* where the temp file is named (fb->work_fd) */
	int dirfd;  /* the target's directory */
	int fd;	    /* O_RDWR, -1 when none */
	char name[SMUX__FILE_TMP_NAME_MAX];
};

/* The backend behind @b, or NULL when @b is not a file backend. */
struct smux__file *smux__file_from(struct smux_backend *b);

/*
 * openat2(@dirfd, @path, @flags | O_CLOEXEC, @mode) resolving beneath
 * @dirfd with no symlinks, magic links or mount crossings. @path "" means
 * @dirfd itself. Returns the fd or a negative errno (ELOOP: a symlink was
 * in the way; EXDEV: the path would leave @dirfd).
 */
int smux__file_open(int dirfd, const char *path, int flags, mode_t mode);

/*
 * Fills @err for a failed system call on @key (positive errno @e) and
 * returns a negative errno. ELOOP/EXDEV become PERMISSION_DENIED (a symlink
 * or a path leaving the root); ENOTDIR, EISDIR, ENOTEMPTY, ENOSPC keep
 * their specific codes.
 */
int smux__file_fail(const struct smux__file *fb, struct smux_error *err, int e,
		    const char *op, const char *key);

/* 0, or BACKEND_ABORTED/TIMEOUT from @ctx (NULL: never cancelled). */
int smux__file_check_ctx(const struct smux__file *fb,
			 const struct smux_ctx *ctx, struct smux_error *err);

/*
 * Validates @key again (defence in depth) with smux_key_check @flags and
 * copies it into @path (SMUX_KEY_MAX + 1 bytes) without its trailing '/'.
 * *@is_dir tells whether there was one.
 */
int smux__file_key_path(const struct smux__file *fb, const char *key,
			unsigned flags, char *path, bool *is_dir,
			struct smux_error *err);

/*
 * mkdir -p of @dir (relative to the root, "" for the root), one component
 * at a time, each opened beneath the previous one; when @sync (and not
 * no_fsync) fsyncs each directory that gained an entry, as a put (which
 * promises durability) needs; mkdir and rename pay that only when a
 * program asks (ops->sync). Returns the directory opened O_RDONLY in
 * *@out. A component that is a file is NOT_DIRECTORY.
 */
int smux__file_mkdirs(const struct smux__file *fb, const char *dir, bool sync,
		      int *out, const char *op, const char *key,
		      struct smux_error *err);

/* @create of smux__file_open_parent(): false, or one of these. */
#define SMUX__FILE_CREATE      1 /* mkdir -p, not durable (true) */
#define SMUX__FILE_CREATE_SYNC 2 /* mkdir -p, new entries fsync'd */

/*
 * Opens the parent directory of @path (no trailing '/') beneath the root
 * with @flags (O_RDONLY or O_PATH; O_DIRECTORY is added), creating missing
 * directories like mkdir -p when @create (SMUX__FILE_CREATE[_SYNC]). *@name points at the last
 * component inside @path. Errors name @op and @key; ENOENT and ENOTDIR
 * are returned as is (-ENOENT, -ENOTDIR) for the caller to interpret,
 * with @err filled all the same.
 */
int smux__file_open_parent(const struct smux__file *fb, const char *path,
			   int flags, int create, int *dirfd, const char **name,
			   const char *op, const char *key,
			   struct smux_error *err);

/* Opens @path read-only with its stat in @st: a directory is
 * IS_DIRECTORY unless @allow_dir, anything not regular is refused, a
 * missing file (or a file named by a marker key, @is_dir) is
 * KEY_NOT_FOUND. Returns the fd or a negative errno. */
int smux__file_open_object(const struct smux__file *fb, const char *path,
			   bool is_dir, bool allow_dir, const char *op,
			   const char *key, struct stat *st,
			   struct smux_error *err);

/* True when a put or commit with @opts sets the permission bits:
 * opts->mode is not 0, or SMUX_PUT_MODE says 0000 is meant. */
static inline bool smux__file_put_has_mode(const struct smux_put_opts *opts)
{
	return opts && (opts->mode || (opts->flags & SMUX_PUT_MODE));
}

/*
 * Gives @fd (any fd, O_PATH included; never follows a link) the owner
 * @uid/@gid; SMUX_ID_NONE keeps that one. The kernel clears setuid and
 * setgid of a regular file whose owner changes, so an owner is set before
 * the mode. 0 or -errno.
 */
int smux__file_set_owner(int fd, uint32_t uid, uint32_t gid);
/* Owner, mode and times (@a) of the open file @fd: 0 or a negative errno. */
int smux__file_fsetattr(int fd, const struct smux_setattr *a);
/*
 * The owner of a new inode @fd replacing an object: @opts's with
 * SMUX_PUT_OWNER (a failure is returned), else the replaced object's
 * (@keep, NULL when there was none; best effort: a daemon that may not
 * give files away leaves its own). 0 or -errno.
 */
int smux__file_put_owner(int fd, const struct smux_put_opts *opts,
			 const struct stat *keep);

/* Hex version token of a stat (size and mtime). */
void smux__file_etag(const struct stat *st, char *etag, size_t size);
/* Fills @info (NULL allowed) from @st: S_IFDIR with size 0 for a
 * directory; owner, atime, ctime and link count as the stat has them. */
void smux__file_fill_info(const struct stat *st, struct smux_info *info);

/* Creates a fresh temp file in the work folder, to be published into
 * @dirfd. */
int smux__file_tmp_create(const struct smux__file *fb, int dirfd,
			  struct smux__file_tmp *t, const char *key,
			  struct smux_error *err);
/*
 * Gives the temp file @mode (permission bits), @mtime_ns
 * (SMUX__FILE_MTIME_NOW: a unique now), and
 * fsyncs it when @sync.
 */
int smux__file_tmp_seal(const struct smux__file *fb, struct smux__file_tmp *t,
			uint32_t mode, int64_t mtime_ns, bool sync,
			const char *key, struct smux_error *err);
/*
 * Renames the temp file from the work folder over @name in its target
 * directory (the same filesystem: openat2 never crosses a mount beneath
 * the root), fsyncs that directory when @sync and fills @info (NULL allowed) from the published inode. The
 * temp file's fd stays open; the name no longer exists.
 */
int smux__file_tmp_publish(const struct smux__file *fb,
			   struct smux__file_tmp *t, const char *name,
			   bool sync, const char *key, struct smux_info *info,
			   struct smux_error *err);
/* Unlinks the temp file (if still named) and closes its fd. */
void smux__file_tmp_discard(struct smux__file_tmp *t);

/*
 * Makes (when missing) and opens the work folder of @fb, and, when no
 * other live process has it open, removes whatever an earlier run left
 * in it (counted in fb->swept). Sets fb->work_fd, or -1 and
 * fb->work_errno when the root is not writable or fb->read_only (then
 * nothing is touched). 0 or a negative errno.
 */
int smux__file_work_open(struct smux__file *fb, struct smux_error *err);

/*
 * Copies @len bytes from @in at @in_off to @out at @out_off with
 * copy_file_range (reflinks where the filesystem can), falling back to
 * pread/pwrite, checking @ctx between chunks. A source shorter than @len
 * is an IO error.
 */
int smux__file_copy_fd(const struct smux__file *fb, const struct smux_ctx *ctx,
		       int in, uint64_t in_off, int out, uint64_t out_off,
		       uint64_t len, const char *key, struct smux_error *err);

/* @ns since the epoch as a timespec (negative times included). */
void smux__file_timespec(int64_t ns, struct timespec *ts);
/* Sets the mtime of @fd to @mtime_ns (ns since the epoch), keeping the
 * atime. 0 or -errno. */
int smux__file_set_mtime(int fd, int64_t mtime_ns);

/* Writes all of @buf at @off (retrying short writes). 0 or -errno. */
int smux__file_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/*
 * fallocate(2) of @fd for a writer of @key (smux_writer_fallocate's modes,
 * already checked). A refusal of the request by the local filesystem - a
 * mode it lacks (EOPNOTSUPP: NOT_SUPPORTED), no room for the range
 * (ENOSPC, EDQUOT), a range past its largest file (EFBIG), EINVAL - is the
 * caller's error with its errno kept (INVALID_ARGUMENT), never a failing
 * backend: a `fallocate -l 1T` on a small disk must not take a replica out
 * of service (as setxattr's ENOSPC, file_xattr.c). Other errors as
 * smux__file_fail.
 */
int smux__file_fallocate(const struct smux__file *fb, int fd, int mode,
			 uint64_t off, uint64_t len, const char *key,
			 struct smux_error *err);

/*
 * Checks the entry @name of @dirfd before it is replaced: a directory is
 * IS_DIRECTORY, a symlink or other non-regular file PERMISSION_DENIED;
 * absent or regular is 0. Fills *@st (NULL allowed) and *@exists.
 */
int smux__file_check_target(const struct smux__file *fb, int dirfd,
			    const char *name, const char *key, struct stat *st,
			    bool *exists, struct smux_error *err);

/* As smux__file_check_target, but a symlink, FIFO or socket may be
 * replaced too (put, copy, rename: a rename(2) over it replaces the entry
 * itself, never what a symlink points to). */
int smux__file_check_replace(const struct smux__file *fb, int dirfd,
			     const char *name, const char *key, bool *exists,
			     struct smux_error *err);

/* Symlinks, FIFOs and sockets (file_special.c). */

/* S_IFLNK, S_IFIFO or S_IFSOCK. */
bool smux__file_is_special(uint32_t mode);
/* Fills @name (SMUX__FILE_TMP_NAME_MAX bytes) with a fresh temp name. */
void smux__file_tmp_name(char *name);
/*
 * Stores the special object @mode (S_IFLNK with @target, or S_IFIFO /
 * S_IFSOCK with @mode's permission bits) as @name of @dirfd: created
 * under a temp name in the work folder with @mtime_ns
 * (SMUX__FILE_MTIME_NOW: a unique now)
 * and owner @uid/@gid (SMUX_ID_NONE: the daemon's), then renamed over
 * @name (replacing a file or special object atomically). Fills @info.
 */
int smux__file_put_special(const struct smux__file *fb, int dirfd,
			   const char *name, const char *key, uint32_t mode,
			   const char *target, int64_t mtime_ns, uint32_t uid,
			   uint32_t gid, struct smux_info *info,
			   struct smux_error *err);
/* The put of a special object: the target is @src's content (1 to
 * PATH_MAX - 1 bytes, no NUL); a FIFO or socket takes no content. */
int smux__file_put_special_src(const struct smux__file *fb, int dirfd,
			       const char *name, const char *key,
			       const struct smux_source *src,
			       const struct smux_put_opts *opts,
			       struct smux_info *info, struct smux_error *err);
/*
 * Looks at @path (no trailing '/') without following it. Returns 1 when it
 * is a special object: *@st is its lstat with st_size the length of its
 * content, @target (PATH_MAX bytes) its NUL-terminated target ("" for a
 * FIFO or socket). 0 when it is something else (*@st filled), or a
 * negative errno with @err filled (a missing key is KEY_NOT_FOUND).
 */
int smux__file_find_special(const struct smux__file *fb, const char *path,
			    const char *key, const char *op, struct stat *st,
			    char *target, struct smux_error *err);
/* setattr of a special object at @path: times and owner never follow the
 * link; a symlink's mode is NOT_SUPPORTED. 1 when done, 0 when @path is
 * no special object, or a negative errno. */
int smux__file_setattr_special(const struct smux__file *fb, const char *path,
			       const char *key, const struct smux_setattr *a,
			       struct smux_error *err);

/* The list and writer_open operations (file_list.c, file_writer.c). */
int smux__file_list(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *prefix, const char *delimiter, smux_list_fn fn,
		    void *arg, struct smux_error *err);
int smux__file_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, unsigned flags,
			   struct smux_writer **out, struct smux_error *err);
/* The in-place writer (file_inplace.c): writer_open with
 * SMUX_WRITER_INPLACE; @path is @key's path (smux__file_key_path). */
int smux__file_inplace_open(struct smux__file *fb, const char *key,
			    const char *path, unsigned flags,
			    struct smux_writer **out, struct smux_error *err);
/* The reader_open operation (file_reader.c). */
int smux__file_reader_open(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, struct smux_reader **out,
			   struct smux_error *err);

/* Extended attributes of @key (backend.h ops->getxattr etc.;
 * file_xattr.c). */
int smux__file_getxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, void *buf,
			size_t size, size_t *out_len, struct smux_error *err);
int smux__file_setxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, const void *value,
			size_t size, int flags, struct smux_error *err);
int smux__file_listxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, char *buf, size_t size,
			 size_t *out_len, struct smux_error *err);
int smux__file_removexattr(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, const char *name,
			   struct smux_error *err);

#endif /* SMUX_BACKENDS_FILE_INTERNAL_H */
