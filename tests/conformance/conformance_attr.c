/* SPDX-License-Identifier: MIT */
/*
 * conformance_attr.c - rename, setattr, sync and special objects
 * (symlinks, FIFOs): what every backend and mode must do, natively or
 * through the dispatch wrappers' fallbacks.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cmocka.h>

#include "conformance/conformance.h"

void conf_test_rename(void **state)
{
	struct conf_env *env = *state;
	struct smux_put_opts opts = {.mode = 0640,
				     .mtime_ns = 1700000000123456789LL};
	struct smux_source src;
	struct smux_info before, after;
	struct smux_error err;

	smux_source_buf(&src, "moving", 6);
	CONF_OK(smux_backend_put(env->b, &env->ctx, "r/a", &src, &opts, &before,
				 &err),
		&err);
	CONF_OK(smux_backend_rename(env->b, &env->ctx, "r/a", "s/t/b", &err),
		&err);
	CONF_ABSENT(env, "r/a");
	CONF_EXPECT(env, "s/t/b", "moving", 6);
	CONF_OK(smux_backend_head(env->b, &env->ctx, "s/t/b", &after, &err),
		&err);
	/* rename keeps what the object is: content, mode, mtime */
	if (env->fx->flags & CONF_F_NO_ATTRS) {
		print_message("  %s keeps no modes, mtimes to the second: "
			      "mode not checked\n",
			      env->fx->name);
		if (!(env->fx->flags & CONF_F_NO_MTIME))
			assert_in_range(after.mtime_ns,
					opts.mtime_ns - 1000000000,
					opts.mtime_ns + 1000000000);
	} else {
		assert_int_equal(after.mtime_ns, opts.mtime_ns);
		assert_int_equal(after.mode & 07777, 0640);
	}

	/* onto an existing object: replaces it */
	CONF_PUT(env, "c", "old content", 11, NULL);
	CONF_PUT(env, "d", "new", 3, NULL);
	CONF_OK(smux_backend_rename(env->b, &env->ctx, "d", "c", &err), &err);
	CONF_EXPECT(env, "c", "new", 3);
	CONF_ABSENT(env, "d");

	/* a missing source */
	CONF_ERR(smux_backend_rename(env->b, &env->ctx, "nope", "x", &err),
		 &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
	CONF_ABSENT(env, "x");
}

void conf_test_setattr(void **state)
{
	struct conf_env *env = *state;
	struct smux_setattr mode = {.flags = SMUX_SET_MODE, .mode = 0600};
	struct smux_setattr mtime = {.flags = SMUX_SET_MTIME,
				     .mtime_ns = 1600000000000000000LL};
	struct smux_info info;
	struct smux_error err;

	CONF_PUT(env, "f", "attrs", 5, NULL);
	if (env->fx->flags & CONF_F_NO_ATTRS) {
		/* a kind that keeps no modes: the change is taken or refused
		 * (NOT_SUPPORTED), and the content is left as it was */
		int rc = smux_backend_setattr(env->b, &env->ctx, "f", &mode,
					      &err);

		if (rc)
			CONF_ERR(rc, &err, SMUX_E_NOT_SUPPORTED, ENOTSUP);
		CONF_EXPECT(env, "f", "attrs", 5);
		print_message("  %s keeps no modes, mtimes to the second: "
			      "their values not checked\n",
			      env->fx->name);
		return;
	}
	CONF_OK(smux_backend_setattr(env->b, &env->ctx, "f", &mode, &err),
		&err);
	CONF_OK(smux_backend_head(env->b, &env->ctx, "f", &info, &err), &err);
	assert_int_equal(info.mode, S_IFREG | 0600);
	CONF_OK(smux_backend_setattr(env->b, &env->ctx, "f", &mtime, &err),
		&err);
	CONF_OK(smux_backend_head(env->b, &env->ctx, "f", &info, &err), &err);
	assert_int_equal(info.mtime_ns, mtime.mtime_ns);
	assert_int_equal(info.mode, S_IFREG | 0600);
	CONF_EXPECT(env, "f", "attrs", 5); /* content untouched */

	CONF_ERR(smux_backend_setattr(env->b, &env->ctx, "gone", &mode, &err),
		 &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
	CONF_ABSENT(env, "gone");
}

/* A symlink is an object whose content is its target (DESIGN section 6):
 * every backend and mode keeps its type through put, head, get, list,
 * copy and rename; a FIFO is an empty object of its type. */
void conf_test_symlink(void **state)
{
	struct conf_env *env = *state;
	static const char target[] = "../t/x y";
	struct smux_put_opts link = {.mode = S_IFLNK | 0777,
				     .mtime_ns = 1600000000987654321LL};
	struct smux_put_opts fifo = {.mode = S_IFIFO | 0640};
	struct smux_source src;
	struct conf_list l = {0};
	struct smux_error err;
	struct smux_info info;
	/* the kept mtime: not where the storage sets its own */
	bool mtimes = !(env->fx->flags & (CONF_F_NO_ATTRS | CONF_F_NO_MTIME));
	unsigned caps = smux_backend_caps(env->b);

	/* the capabilities say what a put of each type does (a mux over a
	 * member that refuses them refuses them first: smuxfs answers
	 * EPERM) */
	assert_int_equal(!!(caps & SMUX_CAP_SYMLINK),
			 !(env->fx->flags & CONF_F_NO_SPECIAL));
	assert_int_equal(
		!!(caps & SMUX_CAP_FIFO),
		!(env->fx->flags & (CONF_F_NO_SPECIAL | CONF_F_LINKS_ONLY)));
	if (env->fx->flags & CONF_F_NO_SPECIAL) {
		/* refused plainly, never stored as a regular file */
		smux_source_buf(&src, target, sizeof(target) - 1);
		CONF_ERR(smux_backend_put(env->b, &env->ctx, "ln/a", &src,
					  &link, NULL, &err),
			 &err, SMUX_E_NOT_SUPPORTED, ENOTSUP);
		CONF_ABSENT(env, "ln/a");
		print_message("  %s keeps no symlinks: refused\n",
			      env->fx->name);
		return;
	}
	smux_source_buf(&src, target, sizeof(target) - 1);
	CONF_OK(smux_backend_put(env->b, &env->ctx, "ln/a", &src, &link, NULL,
				 &err),
		&err);
	CONF_OK(smux_backend_head(env->b, &env->ctx, "ln/a", &info, &err),
		&err);
	assert_int_equal(info.mode & S_IFMT, S_IFLNK);
	assert_int_equal(info.size, sizeof(target) - 1);
	CONF_EXPECT(env, "ln/a", target, sizeof(target) - 1);

	CONF_OK(conf_list_collect(env, "ln/", NULL, &l, &err), &err);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.keys[0], "ln/a");
	/* a listing without types says "unknown" (0) or the type recorded
	 * when this version was written, never "file" */
	if (!((env->fx->flags & CONF_F_LIST_NO_TYPE) &&
	      (l.info[0].mode & S_IFMT) == 0))
		assert_int_equal(l.info[0].mode & S_IFMT, S_IFLNK);
	conf_list_free(&l);

	CONF_OK(smux_backend_copy(env->b, &env->ctx, "ln/a", "ln/b", &err),
		&err);
	CONF_OK(smux_backend_head(env->b, &env->ctx, "ln/b", &info, &err),
		&err);
	assert_int_equal(info.mode & S_IFMT, S_IFLNK);
	if (mtimes)
		assert_int_equal(info.mtime_ns, link.mtime_ns);
	CONF_EXPECT(env, "ln/b", target, sizeof(target) - 1);

	CONF_OK(smux_backend_rename(env->b, &env->ctx, "ln/b", "m/c", &err),
		&err);
	CONF_ABSENT(env, "ln/b");
	CONF_OK(smux_backend_head(env->b, &env->ctx, "m/c", &info, &err), &err);
	assert_int_equal(info.mode & S_IFMT, S_IFLNK);
	if (mtimes)
		assert_int_equal(info.mtime_ns, link.mtime_ns);
	CONF_EXPECT(env, "m/c", target, sizeof(target) - 1);

	/* replaced by a regular object, and deleted */
	CONF_PUT(env, "m/c", "file", 4, NULL);
	CONF_OK(smux_backend_head(env->b, &env->ctx, "m/c", &info, &err), &err);
	assert_int_equal(info.mode & S_IFMT, S_IFREG);
	CONF_OK(smux_backend_del(env->b, &env->ctx, "ln/a", &err), &err);
	CONF_ABSENT(env, "ln/a");

	smux_source_buf(&src, "", 0);
	if (env->fx->flags & CONF_F_LINKS_ONLY) {
		/* refused plainly, never stored as a regular file */
		CONF_ERR(smux_backend_put(env->b, &env->ctx, "p", &src, &fifo,
					  NULL, &err),
			 &err, SMUX_E_NOT_SUPPORTED, ENOTSUP);
		CONF_ABSENT(env, "p");
		print_message("  %s keeps symlinks, no FIFOs: refused\n",
			      env->fx->name);
		return;
	}
	CONF_OK(smux_backend_put(env->b, &env->ctx, "p", &src, &fifo, NULL,
				 &err),
		&err);
	CONF_OK(smux_backend_head(env->b, &env->ctx, "p", &info, &err), &err);
	assert_int_equal(info.mode & S_IFMT, S_IFIFO);
	assert_int_equal(info.mode & 07777, 0640);
	assert_int_equal(info.size, 0);
	CONF_OK(smux_backend_del(env->b, &env->ctx, "p", &err), &err);
	CONF_ABSENT(env, "p");
}

/* sync makes durable what exists: an object, a directory marker, the
 * root; it changes nothing. A backend without ops->sync answers 0 for any
 * valid key; one with it may say KEY_NOT_FOUND for a missing one, never
 * anything else. */
void conf_test_sync(void **state)
{
	struct conf_env *env = *state;
	struct smux_error err;
	int rc;

	CONF_PUT(env, "y/z", "durable", 7, NULL);
	CONF_OK(smux_backend_sync(env->b, &env->ctx, "y/z", &err), &err);
	CONF_OK(smux_backend_sync(env->b, &env->ctx, "y/", &err), &err);
	CONF_OK(smux_backend_sync(env->b, &env->ctx, "", &err), &err);
	CONF_EXPECT(env, "y/z", "durable", 7);
	rc = smux_backend_sync(env->b, &env->ctx, "y/missing", &err);
	if (rc)
		CONF_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
	CONF_ABSENT(env, "y/missing");
	CONF_ERR(smux_backend_sync(env->b, &env->ctx, "../y", &err), &err,
		 SMUX_E_INVALID_KEY, EINVAL);
}

/*
 * Extended attributes (user.*) where a backend or mode has them
 * (SMUX_CAP_XATTR); a fixture without the capability is checked to
 * answer NOT_SUPPORTED, and that is all it is asked. Set, size
 * query, get, list, XATTR_CREATE/REPLACE, remove, NO_ATTR, a directory,
 * other namespaces refused, and the content left as it was.
 */
void conf_test_xattr(void **state)
{
	struct conf_env *env = *state;
	struct smux_error err;
	char buf[64];
	size_t n = 0;

	CONF_PUT(env, "xa/f", "content", 7, NULL);
	if (!(smux_backend_caps(env->b) & SMUX_CAP_XATTR)) {
		CONF_ERR(smux_backend_setxattr(env->b, &env->ctx, "xa/f",
					       "user.k", "v", 1, 0, &err),
			 &err, SMUX_E_NOT_SUPPORTED, ENOTSUP);
		print_message("  %s keeps no extended attributes "
			      "(NOT_SUPPORTED, as its capabilities say)\n",
			      env->fx->name);
		return;
	}
	CONF_OK(smux_backend_setxattr(env->b, &env->ctx, "xa/f", "user.k",
				      "value", 5, 0, &err),
		&err);
	CONF_OK(smux_backend_getxattr(env->b, &env->ctx, "xa/f", "user.k", NULL,
				      0, &n, &err),
		&err);
	assert_int_equal(n, 5);
	memset(buf, 0, sizeof(buf));
	CONF_OK(smux_backend_getxattr(env->b, &env->ctx, "xa/f", "user.k", buf,
				      sizeof(buf), &n, &err),
		&err);
	assert_int_equal(n, 5);
	assert_string_equal(buf, "value");
	memset(buf, 0, sizeof(buf));
	CONF_OK(smux_backend_listxattr(env->b, &env->ctx, "xa/f", buf,
				       sizeof(buf), &n, &err),
		&err);
	assert_int_equal(n, sizeof("user.k"));
	assert_string_equal(buf, "user.k");
	CONF_ERR(smux_backend_setxattr(env->b, &env->ctx, "xa/f", "user.k", "v",
				       1, XATTR_CREATE, &err),
		 &err, SMUX_E_ALREADY_EXISTS, EEXIST);
	CONF_ERR(smux_backend_setxattr(env->b, &env->ctx, "xa/f", "user.none",
				       "v", 1, XATTR_REPLACE, &err),
		 &err, SMUX_E_NO_ATTR, ENODATA);
	CONF_ERR(smux_backend_setxattr(env->b, &env->ctx, "xa/f", "trusted.k",
				       "v", 1, 0, &err),
		 &err, SMUX_E_NOT_SUPPORTED, ENOTSUP);
	CONF_OK(smux_backend_setxattr(env->b, &env->ctx, "xa/", "user.dir", "d",
				      1, 0, &err),
		&err);
	CONF_OK(smux_backend_getxattr(env->b, &env->ctx, "xa/", "user.dir", buf,
				      sizeof(buf), &n, &err),
		&err);
	assert_int_equal(n, 1);
	CONF_OK(smux_backend_removexattr(env->b, &env->ctx, "xa/f", "user.k",
					 &err),
		&err);
	CONF_ERR(smux_backend_getxattr(env->b, &env->ctx, "xa/f", "user.k", buf,
				       sizeof(buf), &n, &err),
		 &err, SMUX_E_NO_ATTR, ENODATA);
	CONF_ERR(smux_backend_getxattr(env->b, &env->ctx, "xa/gone", "user.k",
				       buf, sizeof(buf), &n, &err),
		 &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
	CONF_EXPECT(env, "xa/f", "content", 7);
}
