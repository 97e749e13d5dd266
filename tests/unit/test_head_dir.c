// SPDX-License-Identifier: MIT
/*
 * test_head_dir.c - SMUX_CAP_HEAD_DIR (include/smux/backend.h): a backend
 * that reports it answers head("a") for the directory "a/" (marker or
 * implied), so KEY_NOT_FOUND for "a" means neither and the daemon does
 * not ask "a/" again (src/fs/ops.c, smuxfs_lookup). The memory backend
 * reports it and keeps the promise; a mux has it when every member does,
 * except sticky-by-key, where "a" and "a/" may live on two shards; a
 * member without it (a file backend: real directories) takes it away.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mux_helpers.h"
#include "smux/file.h"

static void put_str(struct smux_backend *b, const char *key, const char *s)
{
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	smux_source_buf(&src, s, strlen(s));
	MH_OK(smux_backend_put(b, &ctx, key, &src, NULL, NULL, &err), &err);
}

static void test_memory_keeps_the_promise(void **state)
{
	struct smux_backend *mem = mh_memory("mem");
	struct smux_info info;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	assert_true(smux_backend_caps(mem) & SMUX_CAP_HEAD_DIR);
	/* implied by a key under it */
	put_str(mem, "imp/x", "x");
	MH_OK(smux_backend_head(mem, &ctx, "imp", &info, &err), &err);
	assert_true(S_ISDIR(info.mode));
	/* a marker */
	put_str(mem, "mk/", "");
	MH_OK(smux_backend_head(mem, &ctx, "mk", &info, &err), &err);
	assert_true(S_ISDIR(info.mode));
	/* neither: not found, and "a/" is not there either */
	MH_ERR(smux_backend_head(mem, &ctx, "none", &info, &err), &err,
	       SMUX_E_KEY_NOT_FOUND);
	MH_ERR(smux_backend_head(mem, &ctx, "none/", &info, &err), &err,
	       SMUX_E_KEY_NOT_FOUND);
	smux_backend_unref(mem);
}

static void test_mux_caps(void **state)
{
	struct smux_backend *m[2], *mux, *sticky, *mixed, *fb, *two[2];
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR};
	struct smux_file_opts fo = {.no_fsync = true};
	struct smux_error err;
	char dir[] = "/tmp/smux-headdir-XXXXXX";

	(void)state;
	m[0] = mh_memory("m0");
	m[1] = mh_memory("m1");
	mux = mh_mux("mirror", &o, m, NULL, 2);
	assert_true(smux_backend_caps(mux) & SMUX_CAP_HEAD_DIR);
	o.mode = SMUX_MODE_FAILOVER;
	smux_backend_unref(mux);
	mux = mh_mux("failover", &o, m, NULL, 2);
	assert_true(smux_backend_caps(mux) & SMUX_CAP_HEAD_DIR);
	o.mode = SMUX_MODE_STICKY;
	sticky = mh_mux("sticky", &o, m, NULL, 2);
	assert_false(smux_backend_caps(sticky) & SMUX_CAP_HEAD_DIR);
	/* a file backend does not report it: a mux with one has it not */
	assert_non_null(mkdtemp(dir));
	fo.path = dir;
	MH_OK(smux_file_new("f", &fo, &fb, &err), &err);
	assert_false(smux_backend_caps(fb) & SMUX_CAP_HEAD_DIR);
	two[0] = m[0];
	two[1] = fb;
	o.mode = SMUX_MODE_MIRROR;
	mixed = mh_mux("mixed", &o, two, NULL, 2);
	assert_false(smux_backend_caps(mixed) & SMUX_CAP_HEAD_DIR);
	smux_backend_unref(mixed);
	smux_backend_unref(fb);
	smux_backend_unref(sticky);
	smux_backend_unref(mux);
	smux_backend_unref(m[0]);
	smux_backend_unref(m[1]);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memory_keeps_the_promise),
		cmocka_unit_test(test_mux_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
