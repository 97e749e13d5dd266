/* SPDX-License-Identifier: MIT */
/*
 * backend.c - the dispatch wrappers of smux/backend.h: the only place that
 * calls a backend's operations table. Each wrapper validates arguments,
 * checks the call context, calls the operation, and makes sure a failure
 * comes back as a complete error naming the backend. Fallbacks for the
 * optional operations live here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "smux/backend.h"

int smux_backend_init(struct smux_backend *b,
		      const struct smux_backend_ops *ops, const char *name)
{
	memset(b, 0, sizeof(*b));
	b->ops = ops;
	b->name = strdup(name ? name : "");
	if (!b->name)
		return -ENOMEM;
	atomic_init(&b->refs, 1);
	return 0;
}

void smux_backend_release(struct smux_backend *b)
{
	free(b->name);
	b->name = NULL;
}

struct smux_backend *smux_backend_ref(struct smux_backend *b)
{
	atomic_fetch_add(&b->refs, 1);
	return b;
}

void smux_backend_unref(struct smux_backend *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		b->ops->destroy(b);
}

/*
 * Completes the error of a failed operation: a code (an operation that
 * failed without saying why gets the code of its errno), the backend's
 * name, one attempt. Returns the negative errno the caller sees.
 */
static int finish(struct smux_backend *b, int rc, struct smux_error *err)
{
	if (rc >= 0)
		return 0;
	if (err->e.code == SMUX_OK)
		smux_error_from_errno(err, -rc, b->name, "operation failed");
	if (!err->e.backend[0])
		snprintf(err->e.backend, sizeof(err->e.backend), "%s", b->name);
	if (err->e.attempts == 0)
		err->e.attempts = 1;
	if (err->e.sys_errno <= 0)
		err->e.sys_errno = EIO;
	return -err->e.sys_errno;
}

/*
 * finish() for a call that used the caller's sink or source: when the call
 * failed and the sink or source itself had failed (@local, a positive
 * errno), the failure is the caller's (ENOSPC in its cache directory, EIO
 * on its staging file), whatever the backend made of it: LOCAL_IO with the
 * local errno, so the mux neither blames the backend nor falls through.
 * A backend that fails on its own (its file, its connection) keeps its
 * error.
 */
static int finish_local(struct smux_backend *b, int rc, int local,
			struct smux_error *err)
{
	rc = finish(b, rc, err);
	if (rc < 0 && local > 0)
		rc = smux_error_make_local(err, local);
	return rc;
}

/* Common entry checks: the context and one key. */
static int enter(struct smux_backend *b, const struct smux_ctx *ctx,
		 const char *key, unsigned flags, struct smux_error *err)
{
	int rc;

	smux_error_clear(err);
	rc = smux_key_check(key, flags, b->name, err);
	if (rc)
		return rc;
	return smux_ctx_check(ctx, b->name, err);
}

bool smux_backend_key_refused(struct smux_backend *b, const char *key)
{
	return b->ops->key_refused && !smux_key_is_dir(key) &&
	       b->ops->key_refused(b, key);
}

/* INVALID_KEY when @b can never store an object under @key (a write's
 * target): before the backend is called, so nothing is stored. */
static int refuse_target(struct smux_backend *b, const char *what,
			 const char *key, struct smux_error *err)
{
	if (!smux_backend_key_refused(b, key))
		return 0;
	return smux_error_set(err, SMUX_E_INVALID_KEY, b->name,
			      "%s \"%.200s\": a name this backend keeps for "
			      "itself",
			      what, key);
}

/* A caller may pass err == NULL; the wrappers always give backends one. */
#define LOCAL_ERR(err)                \
	struct smux_error local_err_; \
	if (!(err))                   \
	(err) = &local_err_

int smux_backend_get(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_get_opts *opts,
		     struct smux_sink *sink, struct smux_info *info,
		     struct smux_error *err)
{
	struct smux_get_opts all = {.offset = 0, .length = SMUX_LEN_ALL};
	int rc;

	LOCAL_ERR(err);
	rc = enter(b, ctx, key, SMUX_KEY_ALLOW_DIR, err);
	if (rc)
		return rc;
	if (!sink)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "get without a sink");
	sink->error = 0; /* only this get's failures count */
	rc = b->ops->get(b, ctx, key, opts ? opts : &all, sink, info, err);
	return finish_local(b, rc, sink->error, err);
}

int smux_backend_put(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_source *src,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err)
{
	struct smux_put_opts none = {0};
	struct smux_source own;
	atomic_int src_failed = 0;
	int rc;

	LOCAL_ERR(err);
	rc = enter(b, ctx, key, SMUX_KEY_ALLOW_DIR, err);
	if (rc)
		return rc;
	if (!src)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "put without a source");
	if (smux_key_is_dir(key) && src->length != 0)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "directory marker %s must be empty", key);
	rc = refuse_target(b, "put", key, err);
	if (rc)
		return rc;
	/* a private copy that records the source's own failures */
	own = *src;
	own.failed = &src_failed;
	rc = b->ops->put(b, ctx, key, &own, opts ? opts : &none, info, err);
	return finish_local(b, rc, atomic_load(&src_failed), err);
}

int smux_backend_del(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter(b, ctx, key, SMUX_KEY_ALLOW_DIR, err);
	if (rc)
		return rc;
	rc = b->ops->del(b, ctx, key, err);
	return finish(b, rc, err);
}

/*
 * Many deletes: the keys that are valid object keys go to ops->del_many in
 * one call (their order kept), or one del each when the backend has none.
 * @err tells of the first failure met, a bad key's or the backend's.
 */
int smux_backend_del_many(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *const *keys, size_t n, int *rcs,
			  struct smux_error *err)
{
	const char **good = NULL;
	size_t *where = NULL, n_good = 0;
	int *good_rcs = NULL, first = 0, rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	rc = smux_ctx_check(ctx, b->name, err);
	if (rc) {
		for (size_t i = 0; i < n; i++)
			rcs[i] = rc;
		return n ? rc : 0;
	}
	if (!b->ops->del_many) {
		for (size_t i = 0; i < n; i++) {
			struct smux_error one;

			rcs[i] = smux_backend_del(b, ctx, keys[i], &one);
			if (rcs[i] && !first) {
				first = rcs[i];
				*err = one;
			}
		}
		return first;
	}
	good = malloc((n ? n : 1) * sizeof(*good));
	where = malloc((n ? n : 1) * sizeof(*where));
	good_rcs = malloc((n ? n : 1) * sizeof(*good_rcs));
	if (!good || !where || !good_rcs) {
		free(good);
		free(where);
		free(good_rcs);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				      "no memory for %zu deletes", n);
	}
	for (size_t i = 0; i < n; i++) {
		struct smux_error one;

		rcs[i] = smux_key_check(keys[i], 0, b->name, &one);
		if (rcs[i]) {
			if (!first) {
				first = rcs[i];
				*err = one;
			}
			continue;
		}
		where[n_good] = i;
		good[n_good++] = keys[i];
	}
	if (n_good) {
		struct smux_error many;

		smux_error_clear(&many);
		for (size_t j = 0; j < n_good; j++)
			good_rcs[j] = 1; /* not said yet */
		rc = b->ops->del_many(b, ctx, good, n_good, good_rcs, &many);
		rc = finish(b, rc, &many);
		for (size_t j = 0; j < n_good; j++) {
			/* a key the backend said nothing of failed with the
			 * call (or went with its success) */
			int one = good_rcs[j] == 1 ? rc : good_rcs[j];

			rcs[where[j]] = one > 0 ? -EIO : one;
		}
		if (rc && !first) {
			first = rc;
			*err = many;
		}
	}
	free(good);
	free(where);
	free(good_rcs);
	return first;
}

int smux_backend_head(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_info *info,
		      struct smux_error *err)
{
	struct smux_info ignored;
	int rc;

	LOCAL_ERR(err);
	rc = enter(b, ctx, key, SMUX_KEY_ALLOW_DIR, err);
	if (rc)
		return rc;
	rc = b->ops->head(b, ctx, key, info ? info : &ignored, err);
	return finish(b, rc, err);
}

int smux_backend_list(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *prefix, const char *delimiter,
		      smux_list_fn fn, void *arg, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter(b, ctx, prefix ? prefix : "", SMUX_KEY_PREFIX, err);
	if (rc)
		return rc;
	if (delimiter && delimiter[0] == '\0')
		delimiter = NULL;
	if (delimiter && strcmp(delimiter, "/") != 0)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "list delimiter must be \"/\"");
	if (!fn)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "list without a callback");
	rc = b->ops->list(b, ctx, prefix ? prefix : "", delimiter, fn, arg,
			  err);
	return finish(b, rc, err);
}

/* Copy without server-side support: get into an unnamed temporary file,
 * then put from it, so memory stays bounded whatever the object size. */
static int copy_fallback(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *src, const char *dst,
			 struct smux_error *err)
{
	struct smux_source source;
	struct smux_sink sink;
	struct smux_info info;
	struct smux_put_opts opts;
	int fd, rc;

	smux_info_clear(&info);
	fd = smux_tmpfile(b->name, "copy", err);
	if (fd < 0)
		return fd;
	smux_sink_fd(&sink, fd, 0);
	rc = b->ops->get(b, ctx, src,
			 &(struct smux_get_opts){.length = SMUX_LEN_ALL}, &sink,
			 &info, err);
	if (rc) {
		/* a full or failing TMPDIR is ours, not the backend's */
		if (sink.error)
			rc = smux_error_make_local(err, sink.error);
		goto out_close;
	}
	/* a copy keeps the type (a symlink stays one), owner, mode and
	 * mtime */
	smux_put_opts_keep(&opts, &info);
	smux_source_fd(&source, fd, 0, sink.written);
	rc = b->ops->put(b, ctx, dst, &source, &opts, NULL, err);
out_close:
	close(fd);
	return rc;
}

/* Entry checks of the two-key operations (copy, rename, link, exchange):
 * @dst is written, so it must be a name @b can hold. */
static int enter2(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *src, const char *dst, struct smux_error *err)
{
	int rc = enter(b, ctx, src, SMUX_KEY_OBJECT, err);

	if (!rc)
		rc = smux_key_check(dst, SMUX_KEY_OBJECT, b->name, err);
	return rc ? rc : refuse_target(b, "write to", dst, err);
}

/* The backend's copy, or the fallback through a temporary file. */
static int do_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *src, const char *dst, struct smux_error *err)
{
	if (b->ops->copy)
		return b->ops->copy(b, ctx, src, dst, err);
	return copy_fallback(b, ctx, src, dst, err);
}

int smux_backend_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter2(b, ctx, src, dst, err);
	if (rc)
		return rc;
	return finish(b, do_copy(b, ctx, src, dst, err), err);
}

/* rename of a directory "a/" to "b/": one call where the backend can
 * (SMUX_CAP_DIR_RENAME), else NOT_SUPPORTED (the caller moves the keys). */
static int rename_dir(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err)
{
	int rc = enter(b, ctx, src, SMUX_KEY_ALLOW_DIR, err);

	if (!rc)
		rc = smux_key_check(dst, SMUX_KEY_ALLOW_DIR, b->name, err);
	if (rc)
		return rc;
	if (!smux_key_is_dir(src) || !smux_key_is_dir(dst))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "rename \"%s\" to \"%s\": a directory "
				      "renames onto a directory key",
				      src, dst);
	if (!b->ops->rename || !(smux_backend_caps(b) & SMUX_CAP_DIR_RENAME))
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "rename of directory \"%s\" in one call",
				      src);
	return finish(b, b->ops->rename(b, ctx, src, dst, err), err);
}

int smux_backend_rename(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *src, const char *dst,
			struct smux_error *err)
{
	struct smux_info info;
	int rc;

	LOCAL_ERR(err);
	if (smux_key_is_dir(src) || smux_key_is_dir(dst))
		return rename_dir(b, ctx, src, dst, err);
	rc = enter2(b, ctx, src, dst, err);
	if (rc)
		return rc;
	if (strcmp(src, dst) == 0) /* rename(2): nothing to do if it exists */
		rc = b->ops->head(b, ctx, src, &info, err);
	else if (b->ops->rename)
		rc = b->ops->rename(b, ctx, src, dst, err);
	else if ((rc = do_copy(b, ctx, src, dst, err)) == 0)
		/* not atomic: a reader may briefly see both names */
		rc = b->ops->del(b, ctx, src, err);
	return finish(b, rc, err);
}

/* setattr without backend support: rewrite the object with the new
 * attributes (through a temporary file, so memory stays bounded). */
static int setattr_fallback(struct smux_backend *b, const struct smux_ctx *ctx,
			    const char *key, const struct smux_setattr *a,
			    struct smux_error *err)
{
	struct smux_put_opts opts = {0};
	struct smux_source source;
	struct smux_info info;
	struct smux_sink sink;
	int fd, rc;

	/* atime is not a put option: a store without setattr keeps none */
	smux_info_clear(&info);
	if (smux_key_is_dir(key)) {
		/* a marker has no content: put it again with the mode */
		if (a->flags & SMUX_SET_MODE) {
			opts.mode = a->mode & 07777;
			opts.flags |= SMUX_PUT_MODE;
		}
		if (a->flags & SMUX_SET_MTIME) {
			opts.mtime_ns = a->mtime_ns;
			opts.flags |= SMUX_PUT_MTIME;
		}
		if (a->flags & SMUX_SET_OWNER) {
			opts.uid = a->uid;
			opts.gid = a->gid;
			opts.flags |= SMUX_PUT_OWNER;
		}
		smux_source_buf(&source, "", 0);
		return b->ops->put(b, ctx, key, &source, &opts, NULL, err);
	}
	fd = smux_tmpfile(b->name, "setattr", err);
	if (fd < 0)
		return fd;
	smux_sink_fd(&sink, fd, 0);
	rc = b->ops->get(b, ctx, key,
			 &(struct smux_get_opts){.length = SMUX_LEN_ALL}, &sink,
			 &info, err);
	if (rc) {
		/* a full or failing TMPDIR is ours, not the backend's */
		if (sink.error)
			rc = smux_error_make_local(err, sink.error);
		goto out_close;
	}
	smux_put_opts_keep(&opts, &info);
	if (a->flags & SMUX_SET_MODE) {
		opts.mode = (opts.mode & S_IFMT) | (a->mode & 07777);
		opts.flags |= SMUX_PUT_MODE;
	}
	if (a->flags & SMUX_SET_MTIME) {
		opts.mtime_ns = a->mtime_ns;
		opts.flags |= SMUX_PUT_MTIME;
	}
	if (a->flags & SMUX_SET_OWNER) {
		/* SMUX_ID_NONE keeps that one */
		opts.uid = a->uid != SMUX_ID_NONE ? a->uid
			   : info.has_owner	  ? info.uid
						  : SMUX_ID_NONE;
		opts.gid = a->gid != SMUX_ID_NONE ? a->gid
			   : info.has_owner	  ? info.gid
						  : SMUX_ID_NONE;
		opts.flags |= SMUX_PUT_OWNER;
	}
	smux_source_fd(&source, fd, 0, sink.written);
	rc = b->ops->put(b, ctx, key, &source, &opts, NULL, err);
out_close:
	close(fd);
	return rc;
}

int smux_backend_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, const struct smux_setattr *attr,
			 struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter(b, ctx, key, SMUX_KEY_ALLOW_DIR, err);
	if (rc)
		return rc;
	if (!attr)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "setattr without attributes");
	if (b->ops->setattr)
		rc = b->ops->setattr(b, ctx, key, attr, err);
	else
		rc = setattr_fallback(b, ctx, key, attr, err);
	return finish(b, rc, err);
}

int smux_backend_sync(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter(b, ctx, key, SMUX_KEY_ALLOW_DIR | SMUX_KEY_ALLOW_EMPTY, err);
	if (rc)
		return rc;
	if (!b->ops->sync)
		return 0;
	rc = b->ops->sync(b, ctx, key, err);
	return finish(b, rc, err);
}

static int stop_after_one(void *arg, const struct smux_list_entry *e)
{
	(void)arg;
	(void)e;
	return 1;
}

int smux_backend_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			     struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	rc = smux_ctx_check(ctx, b->name, err);
	if (rc)
		return rc;
	if (b->ops->healthcheck)
		rc = b->ops->healthcheck(b, ctx, err);
	else
		rc = b->ops->list(b, ctx, "", "/", stop_after_one, NULL, err);
	return finish(b, rc, err);
}

unsigned smux_backend_caps(struct smux_backend *b)
{
	return b->ops->caps ? b->ops->caps(b) : 0;
}

const char *smux_caps_kept_name(unsigned cap)
{
	return cap == SMUX_CAP_SYMLINK ? "symlinks" : "FIFOs or sockets";
}

unsigned smux_caps_for_mode(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFLNK:
		return SMUX_CAP_SYMLINK;
	case S_IFIFO:
	case S_IFSOCK:
		return SMUX_CAP_FIFO;
	default:
		return 0;
	}
}

size_t smux_backend_key_max(struct smux_backend *b)
{
	size_t n = b->ops->key_max ? b->ops->key_max(b) : SMUX_KEY_MAX;

	return n && n < SMUX_KEY_MAX ? n : SMUX_KEY_MAX;
}

int smux_backend_link(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter2(b, ctx, src, dst, err);
	if (rc)
		return rc;
	if (!b->ops->link)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "hard links are not supported");
	rc = b->ops->link(b, ctx, src, dst, err);
	return finish(b, rc, err);
}

int smux_backend_exchange(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *a, const char *bname,
			  struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter2(b, ctx, a, bname, err);
	if (!rc) /* both names are written */
		rc = refuse_target(b, "exchange", a, err);
	if (rc)
		return rc;
	if (!b->ops->exchange || !(smux_backend_caps(b) & SMUX_CAP_EXCHANGE))
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "exchange of \"%s\" and \"%s\"", a,
				      bname);
	rc = b->ops->exchange(b, ctx, a, bname, err);
	return finish(b, rc, err);
}

/* ---- extended attributes ---- */

/* Entry checks of the xattr wrappers: the key, and for @name (NULL for
 * list) the user. namespace and the length limit. */
static int enter_xattr(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *key, const char *name, bool have_op,
		       struct smux_error *err)
{
	int rc = enter(b, ctx, key, SMUX_KEY_ALLOW_DIR, err);

	if (rc)
		return rc;
	if (name && strncmp(name, "user.", 5) != 0)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "extended attribute \"%.64s\": only "
				      "the user. namespace is kept",
				      name);
	if (name && (name[5] == '\0' || strlen(name) > SMUX_XATTR_NAME_MAX)) {
		smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
			       "extended attribute name of %zu bytes",
			       strlen(name));
		err->e.sys_errno = name[5] ? ERANGE : EINVAL;
		return -err->e.sys_errno;
	}
	if (!have_op)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "backend kind %s keeps no extended "
				      "attributes",
				      b->ops->kind);
	return 0;
}

/* E2BIG for a value or list the interface does not carry. */
static int xattr_too_big(struct smux_backend *b, size_t size,
			 struct smux_error *err)
{
	smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
		       "extended attribute value of %zu bytes", size);
	err->e.sys_errno = E2BIG;
	return -E2BIG;
}

int smux_backend_getxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, const char *name, void *buf,
			  size_t size, size_t *out_len, struct smux_error *err)
{
	size_t ignored;
	int rc;

	LOCAL_ERR(err);
	if (!out_len)
		out_len = &ignored;
	*out_len = 0;
	rc = enter_xattr(b, ctx, key, name ? name : "", b->ops->getxattr, err);
	if (rc)
		return rc;
	if (!buf)
		size = 0;
	if (size > SMUX_XATTR_SIZE_MAX)
		size = SMUX_XATTR_SIZE_MAX;
	rc = b->ops->getxattr(b, ctx, key, name, buf, size, out_len, err);
	return finish(b, rc, err);
}

int smux_backend_setxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, const char *name, const void *value,
			  size_t size, int flags, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter_xattr(b, ctx, key, name ? name : "", b->ops->setxattr, err);
	if (rc)
		return rc;
	if (size > SMUX_XATTR_SIZE_MAX)
		return xattr_too_big(b, size, err);
	if ((flags & ~(XATTR_CREATE | XATTR_REPLACE)) ||
	    flags == (XATTR_CREATE | XATTR_REPLACE) || (size && !value))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "setxattr flags %d", flags);
	rc = b->ops->setxattr(b, ctx, key, name, size ? value : "", size, flags,
			      err);
	return finish(b, rc, err);
}

int smux_backend_listxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, char *buf, size_t size,
			   size_t *out_len, struct smux_error *err)
{
	size_t ignored;
	int rc;

	LOCAL_ERR(err);
	if (!out_len)
		out_len = &ignored;
	*out_len = 0;
	rc = enter_xattr(b, ctx, key, NULL, b->ops->listxattr, err);
	if (rc)
		return rc;
	if (!buf)
		size = 0;
	if (size > SMUX_XATTR_SIZE_MAX)
		size = SMUX_XATTR_SIZE_MAX;
	rc = b->ops->listxattr(b, ctx, key, buf, size, out_len, err);
	return finish(b, rc, err);
}

int smux_backend_removexattr(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, const char *name,
			     struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	rc = enter_xattr(b, ctx, key, name ? name : "", b->ops->removexattr,
			 err);
	if (rc)
		return rc;
	rc = b->ops->removexattr(b, ctx, key, name, err);
	return finish(b, rc, err);
}

void smux_info_clear(struct smux_info *info)
{
	memset(info, 0, sizeof(*info));
	info->uid = SMUX_ID_NONE;
	info->gid = SMUX_ID_NONE;
}

void smux_put_opts_keep(struct smux_put_opts *po, const struct smux_info *info)
{
	memset(po, 0, sizeof(*po));
	po->mtime_ns = info->mtime_ns;
	if (info->has_times)
		po->flags |= SMUX_PUT_MTIME; /* 0 is the epoch */
	if (info->mode) {
		po->mode = info->mode & (S_IFMT | 07777);
		po->flags |= SMUX_PUT_MODE;
	}
	if (info->has_owner && geteuid() == 0) {
		po->uid = info->uid;
		po->gid = info->gid;
		po->flags |= SMUX_PUT_OWNER;
	}
}

int smux_backend_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
			struct smux_statfs *out, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	memset(out, 0, sizeof(*out));
	rc = smux_ctx_check(ctx, b->name, err);
	if (rc || !b->ops->statfs)
		return rc;
	rc = b->ops->statfs(b, ctx, out, err);
	return finish(b, rc, err);
}

int smux_backend_get_all(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, unsigned char **buf, size_t *len,
			 struct smux_error *err)
{
	struct smux_sink sink;
	int rc;

	*buf = NULL;
	*len = 0;
	smux_sink_dyn(&sink);
	rc = smux_backend_get(b, ctx, key, NULL, &sink, NULL, err);
	if (rc) {
		smux_sink_release(&sink);
		return rc;
	}
	*buf = smux_sink_dyn_take(&sink, len);
	if (!*buf) {
		/* an empty object: still hand out a valid, empty string */
		*buf = calloc(1, 1);
		if (!*buf)
			return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
					      NULL);
	}
	return 0;
}

int smux_backend_put_buf(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, const void *buf, size_t len,
			 struct smux_error *err)
{
	struct smux_source src;

	smux_source_buf(&src, buf, len);
	return smux_backend_put(b, ctx, key, &src, NULL, NULL, err);
}

/* ---- writers ---- */

int smux_writer_init(struct smux_writer *w, const struct smux_writer_ops *ops,
		     struct smux_backend *b, const char *key)
{
	memset(w, 0, sizeof(*w));
	w->key = strdup(key);
	if (!w->key)
		return -ENOMEM;
	w->ops = ops;
	w->backend = smux_backend_ref(b);
	return 0;
}

void smux_writer_release(struct smux_writer *w)
{
	free(w->key);
	w->key = NULL;
	smux_backend_unref(w->backend);
	w->backend = NULL;
}

int smux_backend_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, unsigned flags,
			     struct smux_writer **out, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	*out = NULL;
	rc = enter(b, ctx, key, SMUX_KEY_OBJECT, err);
	if (!rc)
		rc = refuse_target(b, "writer for", key, err);
	if (rc)
		return rc;
	if (!b->ops->writer_open)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "backend kind %s has no writer",
				      b->ops->kind);
	rc = b->ops->writer_open(b, ctx, key, flags, out, err);
	return finish(b, rc, err);
}

int smux_writer_pwrite(struct smux_writer *w, const struct smux_ctx *ctx,
		       const void *buf, size_t len, uint64_t off,
		       struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	/* a writer that cannot append itself appends at its pending size */
	if (off == SMUX_OFF_APPEND && !w->appends)
		off = w->ops->size(w);
	if (off != SMUX_OFF_APPEND && off + len < off)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      w->backend->name, "offset overflow");
	rc = smux_ctx_check(ctx, w->backend->name, err);
	if (rc)
		return rc;
	rc = w->ops->pwrite(w, ctx, buf, len, off, err);
	return finish(w->backend, rc, err);
}

long smux_writer_pread(struct smux_writer *w, void *buf, size_t len,
		       uint64_t off, struct smux_error *err)
{
	long n;

	LOCAL_ERR(err);
	smux_error_clear(err);
	if (!w->ops->pread)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED,
				      w->backend->name,
				      "this writer cannot be read back");
	n = w->ops->pread(w, buf, len, off, err);
	if (n < 0)
		return finish(w->backend, (int)n, err);
	return n;
}

int smux_writer_truncate(struct smux_writer *w, const struct smux_ctx *ctx,
			 uint64_t size, struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	rc = smux_ctx_check(ctx, w->backend->name, err);
	if (rc)
		return rc;
	rc = w->ops->truncate(w, ctx, size, err);
	return finish(w->backend, rc, err);
}

int smux_writer_fallocate(struct smux_writer *w, const struct smux_ctx *ctx,
			  int mode, uint64_t off, uint64_t len,
			  struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	/* ENOTSUP is EOPNOTSUPP on Linux: what fallocate(2) answers */
	if (!w->ops->fallocate || !smux_falloc_mode_ok(mode))
		return smux_error_set(
			err, SMUX_E_NOT_SUPPORTED, w->backend->name,
			"fallocate mode %#x of \"%s\"", (unsigned)mode, w->key);
	if (len == 0)
		return smux_error_set(
			err, SMUX_E_INVALID_ARGUMENT, w->backend->name,
			"fallocate of \"%s\": empty range", w->key);
	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off) {
		smux_error_set(err, SMUX_E_INVALID_ARGUMENT, w->backend->name,
			       "fallocate of \"%s\": past the largest file "
			       "size",
			       w->key);
		err->e.sys_errno = EFBIG;
		return -EFBIG;
	}
	rc = smux_ctx_check(ctx, w->backend->name, err);
	if (rc)
		return rc;
	rc = w->ops->fallocate(w, ctx, mode, off, len, err);
	return finish(w->backend, rc, err);
}

int smux_writer_stat(struct smux_writer *w, struct smux_info *info)
{
	return w && w->ops->stat ? w->ops->stat(w, info) : -ENOTSUP;
}

int smux_writer_setattr(struct smux_writer *w, const struct smux_setattr *a)
{
	return w && w->ops->setattr ? w->ops->setattr(w, a) : -ENOTSUP;
}

int smux_writer_passthrough_fd(struct smux_writer *w)
{
	return w && w->ops->passthrough_fd ? w->ops->passthrough_fd(w) : -1;
}

uint64_t smux_writer_size(struct smux_writer *w)
{
	return w->ops->size(w);
}

int smux_writer_commit(struct smux_writer *w, const struct smux_ctx *ctx,
		       const struct smux_put_opts *opts, struct smux_info *info,
		       struct smux_error *err)
{
	struct smux_put_opts none = {0};
	int rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	rc = smux_ctx_check(ctx, w->backend->name, err);
	if (rc)
		return rc;
	rc = w->ops->commit(w, ctx, opts ? opts : &none, info, err);
	return finish(w->backend, rc, err);
}

void smux_writer_close(struct smux_writer *w)
{
	if (w)
		w->ops->close(w);
}

void smux_writer_shared(struct smux_writer *w)
{
	if (w && w->ops->shared)
		w->ops->shared(w);
}

void smux_writer_settle(struct smux_writer *w, const struct smux_ctx *ctx)
{
	if (w && w->ops->settle)
		w->ops->settle(w, ctx);
}

/* ---- readers ---- */

void smux_reader_init(struct smux_reader *r, const struct smux_reader_ops *ops,
		      struct smux_backend *b)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->backend = smux_backend_ref(b);
}

int smux_reader_stat(struct smux_reader *r, struct smux_info *info)
{
	int rc = r->ops->stat ? r->ops->stat(r, info) : 0;

	if (!r->ops->stat || rc)
		*info = r->info;
	return rc;
}

int smux_reader_setattr(struct smux_reader *r, const struct smux_setattr *a)
{
	return r && r->ops->setattr ? r->ops->setattr(r, a) : -ENOTSUP;
}

void smux_reader_rebase(struct smux_reader *r, const struct smux_info *info)
{
	if (r && r->ops->rebase)
		r->ops->rebase(r, info);
}

int smux_reader_current(struct smux_reader *r, const struct smux_ctx *ctx,
			const char *key, struct smux_error *err)
{
	struct smux_info now;
	int rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	if (r->live)
		return 0;
	rc = smux_ctx_check(ctx, r->backend->name, err);
	if (rc)
		return rc;
	if (r->ops->current)
		return finish(r->backend, r->ops->current(r, ctx, key, err),
			      err);
	rc = smux_backend_head(r->backend, ctx, key, &now, err);
	if (rc)
		return rc;
	if (now.size == r->info.size && strcmp(now.etag, r->info.etag) == 0)
		return 0;
	return smux_error_set(err, SMUX_E_PRECONDITION_FAILED, r->backend->name,
			      "\"%s\": another version (etag \"%s\", opened "
			      "\"%s\")",
			      key, now.etag, r->info.etag);
}

void smux_reader_release(struct smux_reader *r)
{
	smux_backend_unref(r->backend);
	r->backend = NULL;
}

int smux_backend_reader_open(struct smux_backend *b, const struct smux_ctx *ctx,
			     const char *key, struct smux_reader **out,
			     struct smux_error *err)
{
	int rc;

	LOCAL_ERR(err);
	*out = NULL;
	rc = enter(b, ctx, key, SMUX_KEY_OBJECT, err);
	if (rc)
		return rc;
	if (!b->ops->reader_open)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "backend kind %s has no reader",
				      b->ops->kind);
	rc = b->ops->reader_open(b, ctx, key, out, err);
	return finish(b, rc, err);
}

long smux_reader_pread(struct smux_reader *r, const struct smux_ctx *ctx,
		       void *buf, size_t len, uint64_t off,
		       struct smux_error *err)
{
	long n;
	int rc;

	LOCAL_ERR(err);
	smux_error_clear(err);
	if (off + len < off)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      r->backend->name, "offset overflow");
	rc = smux_ctx_check(ctx, r->backend->name, err);
	if (rc)
		return rc;
	n = r->ops->pread(r, ctx, buf, len, off, err);
	if (n < 0)
		return finish(r->backend, (int)n, err);
	return n;
}

void smux_reader_close(struct smux_reader *r)
{
	if (r)
		r->ops->close(r);
}
