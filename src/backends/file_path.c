/* SPDX-License-Identifier: MIT */
/*
 * backends/file_path.c - how the file backend turns keys into paths and
 * keeps every path beneath its root (file_internal.h).
 *
 * Owns: the openat2 wrapper, key-to-path checks, mkdir -p beneath the root,
 * parent directory lookup, errno-to-error mapping, and etag/info from a
 * stat. Never resolves a path any other way.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/file_internal.h"

int smux__file_open(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC),
		.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int tries;

	if (!path[0])
		path = ".";
	/* EAGAIN: a concurrent rename raced the lookup; the kernel asks us
	 * to retry. */
	for (tries = 0; tries < 64; tries++) {
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

		if (fd >= 0)
			return (int)fd;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	return -EAGAIN;
}

static enum smux_code fileb_code(int e)
{
	switch (e) {
	case ENOENT:
		return SMUX_E_KEY_NOT_FOUND;
	case ENOTDIR:
		return SMUX_E_NOT_DIRECTORY;
	case EISDIR:
		return SMUX_E_IS_DIRECTORY;
	case ENOTEMPTY:
		return SMUX_E_NOT_EMPTY;
	case EEXIST:
		return SMUX_E_ALREADY_EXISTS;
	case ENOSPC:
	case EDQUOT:
		return SMUX_E_NO_SPACE;
	case EACCES:
	case EPERM:
		return SMUX_E_PERMISSION_DENIED;
	case ENAMETOOLONG:
		return SMUX_E_KEY_TOO_LONG;
	case ENOMEM:
		return SMUX_E_NO_MEMORY;
	default:
		return SMUX_OK; /* whatever smux_error_from_errno says */
	}
}

int smux__file_fail(const struct smux__file *fb, struct smux_error *err, int e,
		    const char *op, const char *key)
{
	const char *who = fb ? fb->base.name : NULL;
	char what[SMUX_ERROR_MSG_MAX];
	enum smux_code code;

	if (e == ELOOP)
		return smux_error_set(err, SMUX_E_PERMISSION_DENIED, who,
				      "%s \"%s\": a symlink is in the way "
				      "(symlinks are never followed)",
				      op, key);
	if (e == EXDEV)
		return smux_error_set(err, SMUX_E_PERMISSION_DENIED, who,
				      "%s \"%s\": path leaves the backend root",
				      op, key);
	snprintf(what, sizeof(what), "%s \"%s\"", op, key);
	smux_error_from_errno(err, e, who, what);
	code = fileb_code(e);
	if (err && code != SMUX_OK) {
		err->e.code = code;
		err->e.sys_errno = e;
	}
	return -e;
}

int smux__file_check_ctx(const struct smux__file *fb,
			 const struct smux_ctx *ctx, struct smux_error *err)
{
	if (!ctx)
		return 0;
	return smux_ctx_check(ctx, fb->base.name, err);
}

/* One path component that is neither "." nor "..": the only kind of name
 * handed to a dirfd+name system call. */
static bool fileb_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > NAME_MAX)
		return false;
	if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
		return false;
	return memchr(name, '/', len) == NULL;
}

/* Defence in depth beside smux_key_check: every segment a plain name. */
static bool fileb_path_ok(const char *path)
{
	const char *p = path;

	for (;;) {
		const char *end = strchrnul(p, '/');

		if (!fileb_name_ok(p, (size_t)(end - p)))
			return false;
		if (!*end)
			return true;
		p = end + 1;
	}
}

int smux__file_key_path(const struct smux__file *fb, const char *key,
			unsigned flags, char *path, bool *is_dir,
			struct smux_error *err)
{
	size_t len;
	int rc;

	rc = smux_key_check(key, flags, fb->base.name, err);
	if (rc)
		return rc;
	len = strlen(key);
	if (len > SMUX_KEY_MAX)
		return smux_error_set(err, SMUX_E_KEY_TOO_LONG, fb->base.name,
				      "key of %zu bytes is too long", len);
	memcpy(path, key, len + 1);
	*is_dir = len > 0 && path[len - 1] == '/';
	if (*is_dir)
		path[len - 1] = '\0';
	if (!fileb_path_ok(path))
		return smux_error_set(err, SMUX_E_INVALID_KEY, fb->base.name,
				      "invalid key \"%s\"", key);
	if (!strncmp(path, SMUX__FILE_WORK_DIR, SMUX__FILE_WORK_DIR_LEN) &&
	    (path[SMUX__FILE_WORK_DIR_LEN] == '\0' ||
	     path[SMUX__FILE_WORK_DIR_LEN] == '/'))
		return smux_error_set(err, SMUX_E_INVALID_KEY, fb->base.name,
				      "invalid key \"%s\": " SMUX__FILE_WORK_DIR
				      " at the root is the backend's work "
				      "folder",
				      key);
	return 0;
}

int smux__file_mkdirs(const struct smux__file *fb, const char *dir, bool sync,
		      int *out, const char *op, const char *key,
		      struct smux_error *err)
{
	char seg[NAME_MAX + 1];
	const char *p = dir;
	int cur, fd;

	fd = smux__file_open(fb->root_fd, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd != -ENOENT) {
		if (fd < 0)
			return smux__file_fail(fb, err, -fd, op, key);
		*out = fd;
		return 0;
	}
	cur = smux__file_open(fb->root_fd, "", O_RDONLY | O_DIRECTORY, 0);
	if (cur < 0)
		return smux__file_fail(fb, err, -cur, op, key);
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);

		if (!fileb_name_ok(p, n)) {
			close(cur);
			return smux_error_set(err, SMUX_E_INVALID_KEY,
					      fb->base.name,
					      "invalid key \"%s\"", key);
		}
		memcpy(seg, p, n);
		seg[n] = '\0';
		fd = smux__file_open(cur, seg, O_RDONLY | O_DIRECTORY, 0);
		if (fd == -ENOENT) {
			int made = mkdirat(cur, seg, SMUX__FILE_DIR_MODE);

			smux__file_ns_changed(fb);
			if (made == 0) {
				if (sync && !fb->no_fsync &&
				    smux__file_sync_dir(fb, cur) < 0)
					fd = -errno;
				else
					fd = smux__file_open(
						cur, seg,
						O_RDONLY | O_DIRECTORY, 0);
			} else if (errno == EEXIST) {
				fd = smux__file_open(cur, seg,
						     O_RDONLY | O_DIRECTORY, 0);
			} else {
				fd = -errno;
			}
		}
		close(cur);
		if (fd < 0)
			return smux__file_fail(fb, err, -fd, op, key);
		cur = fd;
		p = *end ? end + 1 : end;
	}
	*out = cur;
	return 0;
}

int smux__file_open_parent(const struct smux__file *fb, const char *path,
			   int flags, int create, int *dirfd, const char **name,
			   const char *op, const char *key,
			   struct smux_error *err)
{
	char dir[SMUX_KEY_MAX + 1];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	int fd;

	*name = slash ? slash + 1 : path;
	if (n >= sizeof(dir) || !fileb_name_ok(*name, strlen(*name)))
		return smux_error_set(err, SMUX_E_INVALID_KEY, fb->base.name,
				      "invalid key \"%s\"", key);
	memcpy(dir, path, n);
	dir[n] = '\0';
	if (create)
		return smux__file_mkdirs(fb, dir,
					 create == SMUX__FILE_CREATE_SYNC,
					 dirfd, op, key, err);
	fd = smux__file_open(fb->root_fd, dir, flags | O_DIRECTORY, 0);
	if (fd < 0)
		return smux__file_fail(fb, err, -fd, op, key);
	*dirfd = fd;
	return 0;
}

/*
 * The version token is size and mtime: replicas a mux wrote with one
 * explicit mtime agree on it, so a read pinned to a version can be served
 * by any of them. Stores through this backend without an explicit mtime
 * get a unique one (smux_unique_wall_ns), so a token names one content;
 * a file changed behind the backend's back keeps the filesystem's coarser
 * mtime.
 */
void smux__file_etag(const struct stat *st, char *etag, size_t size)
{
	snprintf(etag, size, "%" PRIx64 "-%" PRIx64, (uint64_t)st->st_size,
		 (uint64_t)st->st_mtim.tv_sec * UINT64_C(1000000000) +
			 (uint64_t)st->st_mtim.tv_nsec);
}

/* splitmix64's finalizer: every input bit moves every output bit */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

/* The file's identity: its device and inode, mixed into 64 bits (never
 * 0, which means unknown). */
static uint64_t file_id(const struct stat *st)
{
	uint64_t id = mix64((uint64_t)st->st_ino ^ mix64((uint64_t)st->st_dev));

	return id ? id : 1;
}

void smux__file_fill_info(const struct stat *st, struct smux_info *info)
{
	if (!info)
		return;
	smux_info_clear(info);
	info->mtime_ns = smux_time_ns(st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	info->atime_ns = smux_time_ns(st->st_atim.tv_sec, st->st_atim.tv_nsec);
	info->ctime_ns = smux_time_ns(st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	info->has_times = true;
	info->uid = (uint32_t)st->st_uid;
	info->gid = (uint32_t)st->st_gid;
	info->has_owner = true;
	info->nlink = (uint32_t)st->st_nlink;
	if (S_ISDIR(st->st_mode)) {
		info->mode = S_IFDIR | (st->st_mode & 07777);
		info->size = 0;
	} else if (smux__file_is_special(st->st_mode)) {
		/* a symlink's size is its target's length, as lstat says */
		info->mode = (st->st_mode & S_IFMT) | (st->st_mode & 07777);
		info->size = S_ISLNK(st->st_mode) ? (uint64_t)st->st_size : 0;
	} else {
		info->mode = S_IFREG | (st->st_mode & 07777);
		info->size = (uint64_t)st->st_size;
	}
	info->nlink = (uint32_t)st->st_nlink;
	info->file_id = file_id(st);
	if (S_ISREG(st->st_mode)) {
		info->blocks = (uint64_t)st->st_blocks;
		info->has_blocks = true;
	}
	smux__file_etag(st, info->etag, sizeof(info->etag));
}

int smux__file_check_target(const struct smux__file *fb, int dirfd,
			    const char *name, const char *key, struct stat *st,
			    bool *exists, struct smux_error *err)
{
	struct stat local;

	if (!st)
		st = &local;
	*exists = false;
	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return smux__file_fail(fb, err, errno, "stat", key);
	}
	if (S_ISDIR(st->st_mode))
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, fb->base.name,
				      "\"%s\" is a directory", key);
	if (!S_ISREG(st->st_mode))
		return smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				      fb->base.name,
				      "\"%s\" is not a regular file "
				      "(symlinks are never followed)",
				      key);
	*exists = true;
	return 0;
}

int smux__file_check_replace(const struct smux__file *fb, int dirfd,
			     const char *name, const char *key, bool *exists,
			     struct smux_error *err)
{
	struct stat st;

	*exists = false;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return smux__file_fail(fb, err, errno, "stat", key);
	}
	if (smux__file_is_special(st.st_mode)) {
		*exists = true;
		return 0;
	}
	return smux__file_check_target(fb, dirfd, name, key, &st, exists, err);
}
