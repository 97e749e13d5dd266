/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the FUSE operations table of smuxfs and what every operation
 * shares: init (FUSE configuration and connection tuning), path -> key
 * mapping, libsmux error -> errno mapping, the lookup of what a key is,
 * and struct stat filling.
 *
 * The operations themselves live in ops_meta.c (names, attributes,
 * directories) and ops_io.c (open files and their content). The open-file
 * table is ofile.c's, the .smux/ directory smuxdir.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/fs.h"
#include "smux/mux.h"

#define MIB (1 << 20)

struct smuxfs *smuxfs_get(void)
{
	return fuse_get_context()->private_data;
}

void smuxfs_ctx(struct smux_ctx *ctx)
{
	/* No deadline of our own: a mux root bounds every member call with
	 * its backend_timeout (bulkhead), so no request waits past it. */
	smux_ctx_init(ctx);
}

int smuxfs_path_key(struct smuxfs *fs, const char *path, char *key, size_t cap)
{
	const char *p = path, *seg;
	size_t len, plen = fs->prefix_len;
	size_t kmax = fs->key_max ? fs->key_max : SMUX_KEY_MAX;

	if (!path || path[0] != '/')
		return -EINVAL;
	while (*p == '/')
		p++;
	for (seg = p; *seg;) {
		const char *end = strchr(seg, '/');
		size_t n = end ? (size_t)(end - seg) : strlen(seg);

		if (n > SMUX_KEY_SEGMENT_MAX)
			return -ENAMETOOLONG;
		seg += n;
		while (*seg == '/')
			seg++;
	}
	len = strlen(p);
	while (len && p[len - 1] == '/')
		len--;
	if (!len) {
		/* the root: the prefix without its trailing '/' */
		if (plen)
			plen--;
		if (plen >= cap)
			return -ENAMETOOLONG;
		memcpy(key, fs->prefix, plen);
		key[plen] = '\0';
		return 0;
	}
	/* one byte stays for the '/' of a directory's marker */
	if (plen + len >= cap || plen + len > kmax - 1)
		return -ENAMETOOLONG;
	memcpy(key, fs->prefix, plen);
	memcpy(key + plen, p, len);
	key[plen + len] = '\0';
	return 0;
}

int smuxfs_dir_prefix(const char *key, char *out, size_t cap)
{
	size_t len = strlen(key);

	if (len + 2 > cap)
		return -ENAMETOOLONG;
	memcpy(out, key, len);
	if (len)
		out[len++] = '/';
	out[len] = '\0';
	return 0;
}

int smuxfs_errno_of(const struct smux_error *err)
{
	int e = err->e.sys_errno > 0 ? err->e.sys_errno : EIO;

	/* a file's calls block: EAGAIN (a member draining, a server's 429
	 * or 503) tells a program to retry a non-blocking descriptor, and
	 * write(2), fsync(2) and close(2) of a file answered it (s44-t1,
	 * s44-t4) */
	return e == EAGAIN ? -EIO : -e;
}

int smuxfs_errno(const struct smux_error *err, const char *op, const char *key)
{
	int e = -smuxfs_errno_of(err);
	int level;
	char msg[512];

	/* a backend in trouble, or our own cache or staging disk failing
	 * (full, EIO), is worth a warning; a request that is simply wrong
	 * (not found, not empty, ...) only a debug line */
	if (smux_error_class(&err->e) == SMUX_CLASS_TRANSIENT ||
	    smux_error_class(&err->e) == SMUX_CLASS_LOCAL)
		level = LOG_WARNING;
	else
		level = LOG_DEBUG;
	if (smux_log_enabled(level))
		smux_log(level, "%s %s: %s", op, key ? key : "",
			 smux_error_format(err, msg, sizeof(msg)));
	return -e;
}

/*
 * Written in place, an open file's content is the stored file, which
 * others may append to behind the mount (a log a daemon keeps open while
 * another program appends, or where the kernel placed our O_APPEND write
 * at the size it knew). What was seen of it is asked again after
 * attr_timeout, and at once after an O_APPEND write through the mount,
 * whose landing only the backend knows.
 */
static bool inplace_size_stale(struct smuxfs *fs,
			       const struct smuxfs_ofile_attr *a)
{
	double ttl = fs->opts->attr_timeout;

	if (!a->inplace)
		return false;
	return a->size_unknown ||
	       (double)(smux_now_ns() - a->seen_ns) >= ttl * 1e9;
}

/* The size of an open file: its pending content's, or in place what its
 * writer finds stored now (size_stored), or what the storage said just
 * now (@headed), else the larger of what it said within attr_timeout and
 * what was written through the mount since (a truncation through the
 * mount sets both). */
static uint64_t ofile_size(const struct smuxfs_ofile_attr *a,
			   const struct smux_info *info, bool headed)
{
	if (!a->inplace || a->size_stored)
		return a->size;
	if (headed)
		return info->size;
	return a->seen_ok && a->seen.size > a->size ? a->seen.size : a->size;
}

bool smuxfs_pin_ino(struct smuxfs *fs)
{
	return !(smux_backend_caps(fs->root) & SMUX_CAP_ONE_COPY);
}

void smuxfs_shown_ino(struct smuxfs *fs, const char *key,
		      struct smux_info *info)
{
	struct smuxfs_ofile *of = smuxfs_ofile_find(fs, key);
	uint64_t id;

	if (!of) {
		/* the number the file showed before the answering replica
		 * moved (inomap.c) */
		info->file_id =
			smuxfs_ino_learn(fs, key, info->file_id, info->nlink);
		return;
	}
	/* the number alone: the attributes (a writer's fstat) were read
	 * by the lookup this getattr made */
	id = smuxfs_ofile_shown_id(of);
	if (id) {
		smuxfs_ino_shows(fs, key, info->file_id, id, info->nlink);
		info->file_id = id;
	} else {
		info->file_id =
			smuxfs_ino_learn(fs, key, info->file_id, info->nlink);
	}
	smuxfs_ofile_release(fs, of);
}

/* smuxfs_lookup, with @known's attributes taken as @ka when @known is
 * the open file of @key (NULL: none). */
static int lookup(struct smuxfs *fs, const char *key, bool is_root,
		  struct smuxfs_ofile *known,
		  const struct smuxfs_ofile_attr *ka, bool *is_dir,
		  struct smux_info *info)
{
	char dkey[SMUX_KEY_MAX + 2];
	struct smuxfs_ofile_attr a = {0};
	struct smuxfs_ofile *of;
	struct smux_info local;
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned long gen, agen;
	int64_t t0;
	int rc;

	if (!info)
		info = &local;
	smux_info_clear(info);
	*is_dir = false;
	if (is_root) {
		uint32_t m = atomic_load(&fs->root_mode);

		*is_dir = true;
		info->mode = m ? m : S_IFDIR | 0755;
		info->mtime_ns = atomic_load(&fs->root_mtime_ns);
		info->uid = atomic_load(&fs->root_uid);
		info->gid = atomic_load(&fs->root_gid);
		info->has_owner =
			info->uid != SMUX_ID_NONE || info->gid != SMUX_ID_NONE;
		if (info->uid == SMUX_ID_NONE)
			info->uid = (uint32_t)fs->uid;
		if (info->gid == SMUX_ID_NONE)
			info->gid = (uint32_t)fs->gid;
		return 0;
	}
	/* unlinked, its delete still queued (delq.c): gone for this mount */
	if (smuxfs_delq_has(fs, key))
		return -ENOENT;
	smuxfs_ctx(&ctx);
	of = smuxfs_ofile_find(fs, key);
	if (of) {
		if (of == known) {
			a = *ka;
			rc = 0;
		} else {
			rc = smuxfs_ofile_attr(of, &a);
		}
		if (rc == 0) {
			/* owner, atime, ctime from the object when it is
			 * there (as it was at open while nothing changed it
			 * through the mount); what is pending from the open
			 * file. A file created here and not committed has no
			 * object: no head (tar's create, futimens, fchown,
			 * fchmod each ask for attributes before the one put
			 * at close) */
			bool headed = false;

			if (a.seen_ok && !inplace_size_stale(fs, &a))
				*info = a.seen;
			else if (a.unstored ||
				 smux_backend_head(fs->root, &ctx, key, info,
						   &err) != 0 ||
				 S_ISDIR(info->mode))
				smux_info_clear(info);
			else { /* a create: looked up once while open */
				smuxfs_ofile_set_seen(of, a.seen_gen, info);
				headed = true;
			}
			if (a.ctime_ns > info->ctime_ns)
				info->ctime_ns = a.ctime_ns;
			smux_info_set_size(info, ofile_size(&a, info, headed));
			if (a.size_stored && a.has_blocks) {
				info->blocks = a.blocks;
				info->has_blocks = true;
			}
			if (a.mode_set || !info->mode)
				info->mode = S_IFREG | a.mode;
			info->mtime_ns = a.mtime_ns;
			if (a.has_owner) { /* SMUX_ID_NONE: the object's */
				if (a.uid != SMUX_ID_NONE)
					info->uid = a.uid;
				if (a.gid != SMUX_ID_NONE)
					info->gid = a.gid;
				info->has_owner = true;
			}
		}
		smuxfs_ofile_release(fs, of);
		if (rc == 0)
			return 0;
	}
	/* a name its directory does not have, all of whose names are known
	 * (made or listed within dir_cache_timeout: dirnames.c) */
	if (smuxfs_dirnames_absent(fs, key))
		return -ENOENT;
	/* a directory looked up within attr_timeout (dircache.c) */
	if (smuxfs_dircache_get(fs, key, info)) {
		*is_dir = true;
		return 0;
	}
	/* a file headed within attr_timeout, nothing changed through the
	 * mount since (attrcache.c; a listing heads its entries) */
	if (smuxfs_attrcache_get(fs, key, info))
		return 0;
	/* the first lookup into a fresh listing asks all its entries at
	 * once, in parallel (listattr.c) */
	if (smuxfs_listattr_prefetch(fs, key)) {
		if (smuxfs_attrcache_get(fs, key, info))
			return 0;
		if (smuxfs_dircache_get(fs, key, info)) {
			*is_dir = true;
			return 0;
		}
	}
	/* a directory whose listing gives every file complete: listed
	 * again, one request for the lookups of all its files (relist.c) */
	if (smuxfs_relist(fs, key) && smuxfs_attrcache_get(fs, key, info))
		return 0;
	gen = smuxfs_dircache_gen(fs);
	agen = smuxfs_attrcache_gen(fs, key);
	t0 = smuxfs_dircache_now();
	rc = smux_backend_head(fs->root, &ctx, key, info, &err);
	if (rc == 0) {
		*is_dir = S_ISDIR(info->mode);
		if (*is_dir)
			smuxfs_dircache_put(fs, key, info, gen, t0);
		else
			smuxfs_attrcache_put(fs, key, info, agen, t0);
		return 0;
	}
	if (err.e.code != SMUX_E_KEY_NOT_FOUND)
		return smuxfs_errno(&err, "head", key);
	if (fs->real_dirs) {
		/* a directory would have answered the head */
		smuxfs_absent_note(fs, key);
		return -ENOENT;
	}
	/* the head of "a" asked "a/" already (s3, swift, memory) */
	if (smux_backend_caps(fs->root) & SMUX_CAP_HEAD_DIR) {
		smuxfs_absent_note(fs, key);
		return -ENOENT;
	}
	/* a directory marker, or a directory implied by keys under it */
	rc = smuxfs_dir_prefix(key, dkey, sizeof(dkey));
	if (rc)
		return rc;
	rc = smux_backend_head(fs->root, &ctx, dkey, info, &err);
	if (rc == 0) {
		*is_dir = true;
		info->mode = S_IFDIR | (info->mode & 07777);
		smuxfs_dircache_put(fs, key, info, gen, t0);
		return 0;
	}
	if (err.e.code == SMUX_E_KEY_NOT_FOUND) {
		smuxfs_absent_note(fs, key);
		return -ENOENT;
	}
	return smuxfs_errno(&err, "head", dkey);
}

int smuxfs_lookup(struct smuxfs *fs, const char *key, bool is_root,
		  bool *is_dir, struct smux_info *info)
{
	return lookup(fs, key, is_root, NULL, NULL, is_dir, info);
}

int smuxfs_lookup_open(struct smuxfs *fs, const char *key,
		       struct smuxfs_ofile *of,
		       const struct smuxfs_ofile_attr *a, bool *is_dir,
		       struct smux_info *info)
{
	return lookup(fs, key, false, of, a, is_dir, info);
}

void smuxfs_fill_stat(struct smuxfs *fs, struct stat *st, bool is_dir,
		      const struct smux_info *info)
{
	static const struct smux_info unknown = {
		.uid = SMUX_ID_NONE,
		.gid = SMUX_ID_NONE,
	};
	const struct smux_info *in = info ? info : &unknown;
	uint32_t perm = in->mode & 07777;
	uint64_t size;
	/* a time not known (0 without has_times): the mount's */
	int64_t t = in->mtime_ns || in->has_times ? in->mtime_ns : fs->mount_ns;

	memset(st, 0, sizeof(*st));
	/* 0 is a mode like any other (chmod 000); only an unknown mode
	 * (no type either) gets the defaults */
	if (!in->mode)
		perm = is_dir ? 0755 : 0644;
	if (fs->umask)
		perm &= ~(uint32_t)fs->umask;
	st->st_mode = (is_dir ? S_IFDIR : S_IFREG) | perm;
	if (!is_dir &&
	    (S_ISLNK(in->mode) || S_ISFIFO(in->mode) || S_ISSOCK(in->mode))) {
		/* a symlink's size is its target's length, as lstat says */
		st->st_mode =
			(in->mode & S_IFMT) | (S_ISLNK(in->mode) ? 0777 : perm);
	}
	st->st_nlink = in->nlink ? in->nlink : (is_dir ? 2 : 1);
	/* Where the tree has hard links, a file's number is its identity in
	 * the backend, so every name of it shows one st_ino (rsync -H, cp -a,
	 * find -samefile, du); the one it showed before the answering
	 * replica moved (inomap.c). Else 0: the channel hook (fnode.c)
	 * reports the kernel node's id, as libfuse does without use_ino. */
	if (!is_dir && in->file_id &&
	    (smux_backend_caps(fs->root) & SMUX_CAP_HARDLINK))
		st->st_ino = (ino_t)(smuxfs_ino_alias(in->file_id, in->nlink) |
				     SMUXFS_INO_FILE_ID);
	/* uid=/gid= given by the operator override the objects' owners */
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	if (in->has_owner && in->uid != SMUX_ID_NONE &&
	    !(fs->opts && fs->opts->has_uid))
		st->st_uid = (uid_t)in->uid;
	if (in->has_owner && in->gid != SMUX_ID_NONE &&
	    !(fs->opts && fs->opts->has_gid))
		st->st_gid = (gid_t)in->gid;
	/* a size no file can have (a server's listing said 2^63 - 1 or
	 * more) shows as the largest off_t, its blocks counted without
	 * overflow (UBSan stopped the daemon at (size + 511) / 512) */
	size = in->size > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : in->size;
	st->st_size = is_dir ? 0 : (off_t)size;
	st->st_blocks =
		in->has_blocks && !is_dir
			? (blkcnt_t)(in->blocks > (uint64_t)INT64_MAX
					     ? (uint64_t)INT64_MAX
					     : in->blocks)
			: (blkcnt_t)((uint64_t)st->st_size / 512 +
				     ((uint64_t)st->st_size % 512 != 0));
	st->st_blksize = MIB;
	smuxfs_timespec(t, &st->st_mtim);
	smuxfs_timespec(in->atime_ns || in->has_times ? in->atime_ns : t,
			&st->st_atim);
	smuxfs_timespec(in->ctime_ns || in->has_times ? in->ctime_ns : t,
			&st->st_ctim);
}

mode_t smuxfs_caller_mode(struct smuxfs *fs, mode_t mode)
{
	(void)fs;
	mode &= 07777;
	if (fuse_get_context()->uid != 0)
		mode &= ~(mode_t)(S_ISUID | S_ISGID);
	return mode;
}

/*
 * Attributes of @key, the parent directory of a name being created: the
 * kernel resolved it as a directory, so on object stores its "key/" is
 * asked at once (one request: the marker, or a listing for an implied
 * directory) instead of "key" first (a HEAD answered 404).
 */
static int parent_lookup(struct smuxfs *fs, const char *key, bool is_root,
			 bool *is_dir, struct smux_info *info)
{
	char dkey[SMUX_KEY_MAX + 2];
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned long gen;
	int64_t t0;

	if (is_root || fs->real_dirs ||
	    smuxfs_dir_prefix(key, dkey, sizeof(dkey)) != 0)
		return smuxfs_lookup(fs, key, is_root, is_dir, info);
	*is_dir = true;
	if (smuxfs_dircache_get(fs, key, info))
		return 0;
	gen = smuxfs_dircache_gen(fs);
	t0 = smuxfs_dircache_now();
	smuxfs_ctx(&ctx);
	if (smux_backend_head(fs->root, &ctx, dkey, info, &err) != 0)
		return smuxfs_lookup(fs, key, false, is_dir, info);
	info->mode = S_IFDIR | (info->mode & 07777);
	smuxfs_dircache_put(fs, key, info, gen, t0);
	return 0;
}

int smuxfs_lookup_dir(struct smuxfs *fs, const char *key, bool *is_dir,
		      struct smux_info *info)
{
	return parent_lookup(fs, key, false, is_dir, info);
}

/* @po for a new object of the caller: @sgid, its directory is
 * set-group-ID, of group @dir_gid (SMUX_ID_NONE: not kept). */
static void owner_fill(struct smuxfs *fs, bool is_dir, bool sgid,
		       uint32_t dir_gid, struct smux_put_opts *po)
{
	const struct fuse_context *c = fuse_get_context();

	po->flags |= SMUX_PUT_MODE;
	if (sgid && is_dir)
		po->mode |= S_ISGID;
	if (geteuid() != 0 || !(smux_backend_caps(fs->root) & SMUX_CAP_OWNER))
		return;
	po->flags |= SMUX_PUT_OWNER;
	po->uid = (uint32_t)c->uid;
	po->gid = sgid && dir_gid != SMUX_ID_NONE ? dir_gid : (uint32_t)c->gid;
}

void smuxfs_caller_owner(struct smuxfs *fs, const char *key, bool is_dir,
			 struct smux_put_opts *po)
{
	const char *slash = strrchr(key, '/');
	char parent[SMUX_KEY_MAX + 2];
	struct smux_info pinfo;
	bool pdir = false, sgid = false;
	size_t n = slash ? (size_t)(slash - key) : 0;

	/* a file takes nothing of a set-group-ID directory but its group,
	 * and only where owners are given: no lookup of the directory (on
	 * a WebDAV server one PROPFIND a create, each create having moved
	 * the directory's mtime) */
	if (!is_dir && (geteuid() != 0 ||
			!(smux_backend_caps(fs->root) & SMUX_CAP_OWNER))) {
		owner_fill(fs, false, false, SMUX_ID_NONE, po);
		return;
	}
	smux_info_clear(&pinfo);
	if (n < sizeof(parent)) {
		memcpy(parent, key, n);
		parent[n] = '\0';
		/* the mount root is "" or the prefix without its '/' */
		sgid = parent_lookup(fs, parent, n + 1 == fs->prefix_len || !n,
				     &pdir, &pinfo) == 0 &&
		       pdir && (pinfo.mode & S_ISGID);
	}
	owner_fill(fs, is_dir, sgid,
		   sgid && pinfo.has_owner ? pinfo.gid : SMUX_ID_NONE, po);
}

bool smuxfs_writer_dir_group(struct smuxfs *fs)
{
	unsigned need = SMUX_CAP_INPLACE | SMUX_CAP_DIR_GROUP;

	return !fs->force_staging &&
	       (smux_backend_caps(fs->root) & need) == need;
}

void smuxfs_caller_owner_group(struct smuxfs *fs, uint32_t dir_group,
			       struct smux_put_opts *po)
{
	owner_fill(fs, false, dir_group != SMUX_ID_NONE, dir_group, po);
}

uint32_t smuxfs_dir_group(struct smuxfs *fs, const char *key)
{
	const char *slash = strrchr(key, '/');
	size_t n = slash ? (size_t)(slash - key) : 0;
	char parent[SMUX_KEY_MAX + 2];
	struct smux_info info;
	struct smux_error err;
	struct smux_ctx ctx;
	bool is_dir;

	if (n >= sizeof(parent))
		return SMUX_ID_NONE;
	memcpy(parent, key, n);
	parent[n] = '\0';
	if (n + 1 == fs->prefix_len || !n) {
		/* the root: kept by the daemon, never an open file */
		if (smuxfs_lookup(fs, parent, true, &is_dir, &info) != 0)
			return SMUX_ID_NONE;
	} else {
		/* a head, not smuxfs_lookup: that one consults the open
		 * files, and the caller holds an ofile's lock */
		smuxfs_ctx(&ctx);
		if (smux_backend_head(fs->root, &ctx, parent, &info, &err))
			return SMUX_ID_NONE;
	}
	if (!S_ISDIR(info.mode) || !(info.mode & S_ISGID) || !info.has_owner)
		return SMUX_ID_NONE;
	return info.gid;
}

void smuxfs_timespec(int64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
	if (ts->tv_nsec < 0) {
		ts->tv_sec--;
		ts->tv_nsec += 1000000000;
	}
}

void smuxfs_raise_readahead(struct smuxfs *fs)
{
	FILE *f;

	if (!fs->readahead_path[0] || atomic_load(&fs->readahead_done) ||
	    atomic_exchange(&fs->readahead_done, true))
		return;
	f = fopen(fs->readahead_path, "we");
	if (!f) {
		smux_log(LOG_DEBUG, "read-ahead: cannot open %s: %s",
			 fs->readahead_path, strerror(errno));
		return;
	}
	fputs("8192\n", f);
	if (fclose(f) != 0)
		smux_log(LOG_DEBUG, "read-ahead: cannot write %s: %s",
			 fs->readahead_path, strerror(errno));
	else
		smux_log(LOG_DEBUG, "read-ahead set to 8 MiB (%s)",
			 fs->readahead_path);
}

/*
 * Set-id bits. A write or a truncation by a process without CAP_FSETID
 * clears setuid (and setgid on a group-executable file), and so does any
 * chown, as a local filesystem does. Since fnode.c asks for
 * FUSE_HANDLE_KILLPRIV_V2 at INIT, the protocol leaves the clearing to
 * us and marks the requests of callers without CAP_FSETID (a WRITE, an
 * OPEN with O_TRUNC, a SETATTR of the size). Linux 6.x still sends the
 * mode change itself for cached writes, truncations and chowns (its
 * notify_change turns the kill flags into a chmod), so what follows only
 * makes sure: it finds the bits already gone. Without the capability (an
 * older kernel), direct writes and an open with O_TRUNC carry flags the
 * high-level API does not pass on, so a caller other than root counts as
 * asking.
 */
static bool kill_asked(struct smuxfs *fs)
{
	bool asked;

	if (smuxfs_fnode_killpriv(fs, &asked))
		return asked;
	return fuse_get_context()->uid != 0;
}

/* The set-id bits of @mode (a file of group @gid) a write, truncation or
 * chown by the caller clears: setuid always; setgid with the group's
 * execute bit, or when the caller is neither root nor in that group
 * (Linux 6.x, setattr_should_drop_sgid). */
static mode_t kill_bits(mode_t mode, gid_t gid)
{
	const struct fuse_context *c = fuse_get_context();

	if ((mode & S_ISGID) &&
	    ((mode & S_IXGRP) ||
	     (c->uid != 0 && !smuxfs_caller_in_group(c, gid))))
		return S_ISUID | S_ISGID;
	return S_ISUID;
}

/* Clears them on the open file of @fi (its pending attributes). */
static int kill_priv(const char *path, struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = fi ? (struct smuxfs_fh *)fi->fh : NULL;
	struct smuxfs_ofile_attr a = {0};
	struct stat st;
	mode_t kill;
	int rc;

	if (!fh || fh->kind != SMUXFS_FH_FILE || !fh->of || !kill_asked(fs) ||
	    smuxfs_ofile_attr(fh->of, &a) != 0 ||
	    !(a.mode & (S_ISUID | S_ISGID)))
		return 0;
	/* the group, for setgid without group execute (rare: asked) */
	if (!a.has_owner)
		a.gid = (a.mode & S_ISGID) && !(a.mode & S_IXGRP) &&
					smuxfs_getattr(path, &st, fi) == 0
				? st.st_gid
				: SMUX_ID_NONE;
	kill = kill_bits(a.mode, a.gid);
	if (!(a.mode & kill))
		return 0;
	rc = smuxfs_chmod(path, a.mode & 07777 & ~kill, fi);
	/* a WRITE's reply carries no attributes: the kernel's mode of the
	 * file would show the bits for attr_timeout */
	if (rc == 0)
		smuxfs_fnode_inval_attr();
	return rc;
}

/* Whether a chown clears set-id bits of @st: anything but a directory
 * (and a symbolic link, which has none), as Linux does. */
static bool chown_kills(const struct stat *st)
{
	return !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode) &&
	       (st->st_mode & kill_bits(st->st_mode, st->st_gid));
}

/* Clears them on what @path (or the open file of @fi) is, when it is a
 * regular file (a write, a truncation), or anything a chown clears them
 * of (@chown), with the bits of @also (decided before the chown). */
static int kill_priv_stat(const char *path, struct fuse_file_info *fi,
			  bool chown, mode_t also)
{
	struct stat st;
	int rc = smuxfs_getattr(path, &st, fi);
	mode_t kill;

	if (rc || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode) ||
	    (!chown && !S_ISREG(st.st_mode)))
		return rc;
	/* once: the caller's groups are read from /proc */
	kill = st.st_mode & (kill_bits(st.st_mode, st.st_gid) | also);
	return kill ? smuxfs_chmod(path, st.st_mode & 07777 & ~kill, fi) : 0;
}

static int smuxfs_write_killpriv(const char *path, const char *buf, size_t size,
				 off_t off, struct fuse_file_info *fi)
{
	int rc = kill_priv(path, fi);

	return rc ? rc : smuxfs_write(path, buf, size, off, fi);
}

/* open(O_TRUNC) truncates before any write: the same rule applies */
static int smuxfs_open_killpriv(const char *path, struct fuse_file_info *fi)
{
	int rc = smuxfs_open(path, fi);

	if (rc || !(fi->flags & O_TRUNC))
		return rc;
	rc = kill_priv(path, fi);
	if (rc)
		smuxfs_release(path, fi);
	return rc;
}

/* truncate(2), ftruncate(2): the kernel clears the bits itself unless it
 * left that to us */
static int smuxfs_truncate_killpriv(const char *path, off_t size,
				    struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	int rc = smuxfs_truncate(path, size, fi);
	bool asked;

	if (rc || !smuxfs_fnode_killpriv(fs, &asked) || !asked)
		return rc;
	return kill_priv_stat(path, fi, false, 0);
}

/* Whether @path (or the file of @fi) is open for writing through the
 * mount (an ofile). */
static bool open_for_writing(struct smuxfs *fs, const char *path,
			     struct fuse_file_info *fi)
{
	struct smuxfs_fh *fh = fi ? (struct smuxfs_fh *)fi->fh : NULL;
	char key[SMUX_KEY_MAX + 2];
	struct smuxfs_ofile *of;

	if (fh && fh->kind == SMUXFS_FH_FILE && fh->of)
		return true;
	if (!path || smuxfs_path_key(fs, path, key, sizeof(key)) != 0)
		return false;
	of = smuxfs_ofile_find(fs, key);
	if (of)
		smuxfs_ofile_release(fs, of);
	return of != NULL;
}

/* chown(2) of anything but a directory clears them, also one to -1, -1
 * (a file backend's own chown does too; an object store keeps the owner
 * as metadata) */
static int smuxfs_chown_killpriv(const char *path, uid_t uid, gid_t gid,
				 struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	uid_t caller = fuse_get_context()->uid;
	bool asked, drop_sgid;
	struct stat st;
	int rc;

	/* chown(f, -1, -1) clears set-id bits, which only the file's owner
	 * (or root) may change: the kernel dropped the mode change before
	 * its own check (FUSE_HANDLE_KILLPRIV_V2), so it is made here. ext4
	 * answers EPERM and keeps the bits. The kernel's own clearing before
	 * a cached write by anyone who may write the file comes the same
	 * way (a SETATTR that changes nothing, fnode.c's chown_unchanged),
	 * and is no chown: a file open for writing through the mount gets
	 * its bits cleared whoever asks. */
	if (uid == (uid_t)-1 && gid == (gid_t)-1 && caller != 0 &&
	    smuxfs_fnode_killpriv(fs, &asked) &&
	    smuxfs_getattr(path, &st, fi) == 0 && chown_kills(&st) &&
	    st.st_uid != caller && !open_for_writing(fs, path, fi))
		return -EPERM;
	/* A group change by a caller outside the group the file has now:
	 * Linux decides about setgid without group execute before the
	 * change (chown_common asks setattr_should_drop_sgid first), and a
	 * non-root caller is always in the new group, which is all
	 * kill_priv_stat sees after it. */
	drop_sgid = gid != (gid_t)-1 && caller != 0 &&
		    smuxfs_fnode_killpriv(fs, &asked) &&
		    smuxfs_getattr(path, &st, fi) == 0 &&
		    !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) &&
		    (st.st_mode & S_ISGID) && !(st.st_mode & S_IXGRP) &&
		    (kill_bits(st.st_mode, st.st_gid) & S_ISGID);
	rc = smuxfs_chown(path, uid, gid, fi);
	if (rc || !smuxfs_fnode_killpriv(fs, &asked))
		return rc;
	return kill_priv_stat(path, fi, true, drop_sgid ? S_ISGID : 0);
}

static void *smuxfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	struct smuxfs *fs = fuse_get_context()->private_data;

	cfg->attr_timeout = fs->opts->attr_timeout;
	cfg->entry_timeout = fs->opts->entry_timeout;
	cfg->negative_timeout = fs->opts->negative_timeout;
	cfg->hard_remove = 1;
	cfg->nullpath_ok = 1;
	/* st_ino as getattr reports it: a file's identity where the tree has
	 * hard links, else 0, which the channel hook (fnode.c) replaces by
	 * the kernel node's id */
	cfg->use_ino = 1;
	/* 1 MiB requests; read-ahead can only be lowered here (main.c
	 * raises the mount's bdi read-ahead instead). Async reads stay on. */
	conn->max_write = MIB;
	conn->max_readahead = MIB;
	/* Set-id bits: the kernel marks what must clear them
	 * (FUSE_HANDLE_KILLPRIV_V2, asked for by the channel hook, fnode.c:
	 * libfuse 3.14 has no name for it) or clears them itself; the first
	 * version of the capability would leave it to us without saying
	 * which callers are privileged. */
	conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
	smux_log(LOG_INFO, "mounted (max_write %u, kernel protocol %u.%u)",
		 conn->max_write, conn->proto_major, conn->proto_minor);
	return fs;
}

static void smuxfs_destroy(void *private_data)
{
	(void)private_data;
	smux_log(LOG_INFO, "unmounting");
}

const struct fuse_operations smuxfs_ops = {
	.getattr = smuxfs_getattr,
	.access = smuxfs_access,
	.mknod = smuxfs_mknod,
	.mkdir = smuxfs_mkdir,
	.unlink = smuxfs_unlink,
	.rmdir = smuxfs_rmdir,
	.readlink = smuxfs_readlink,
	.symlink = smuxfs_symlink,
	.rename = smuxfs_rename,
	.link = smuxfs_link,
	.chmod = smuxfs_chmod,
	.chown = smuxfs_chown_killpriv,
	.truncate = smuxfs_truncate_killpriv,
	.open = smuxfs_open_killpriv,
	.read = smuxfs_read,
	.write = smuxfs_write_killpriv,
	.statfs = smuxfs_statfs,
	.flush = smuxfs_flush,
	.release = smuxfs_release,
	.poll = smuxfs_poll,
	.fsync = smuxfs_fsync,
	.fallocate = smuxfs_fallocate,
	.opendir = smuxfs_opendir,
	.readdir = smuxfs_readdir,
	.releasedir = smuxfs_releasedir,
	.fsyncdir = smuxfs_fsyncdir,
	.init = smuxfs_init,
	.destroy = smuxfs_destroy,
	.create = smuxfs_create,
	.utimens = smuxfs_utimens,
	.getxattr = smuxfs_getxattr,
	.setxattr = smuxfs_setxattr,
	.listxattr = smuxfs_listxattr,
	.removexattr = smuxfs_removexattr,
};

void smuxfs_ops_for(struct fuse_operations *ops, bool xattr)
{
	*ops = smuxfs_ops;
	if (xattr)
		return;
	ops->getxattr = NULL;
	ops->setxattr = NULL;
	ops->listxattr = NULL;
	ops->removexattr = NULL;
}
