// SPDX-License-Identifier: MIT
/*
 * conformance_list.c - listings: delimiter folding, flat listings with
 * directory markers, prefixes that end mid-name or name nothing, stopping
 * from the callback, calling back into the backend from the callback, and
 * a listing of a few thousand keys (pagination, order, no duplicates).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "conformance/conformance.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/*
 * The tree of the listing tests, in byte-wise order. Objects hold their own
 * key as content. "t/c/" is the marker of an empty directory, "t/d/" one of
 * a non-empty directory; "t/b-x" sorts before "t/b/" ('-' < '/') and the
 * UTF-8 "t/é" after "t/z" (bytes compare unsigned).
 */
static const char *const conf_tree[] = {
	"t/a.txt", "t/b-x", "t/b/1", "t/b/2",	   "t/b/c/3", "t/c/",
	"t/d/",	   "t/d/e", "t/z",   "t/\xc3\xa9", "top",
};

static void conf_put_tree(struct conf_env *env)
{
	/* Out of order on purpose: listing order must not be insertion's. */
	for (size_t i = N_OF(conf_tree); i-- > 0;) {
		const char *k = conf_tree[i];
		size_t len = strlen(k);

		CONF_PUT(env, k, k, k[len - 1] == '/' ? 0 : len, NULL);
	}
}

/* Objects report their size and type in listings; a listing that cannot
 * always know the type (CONF_F_LIST_NO_TYPE: S3, Swift, where it is in
 * each object's metadata) says so with mode 0 or gives the type its
 * backend recorded when it wrote that very version (the attribute store,
 * core/attrstore.c), never a guess. */
static void conf_check_infos(const struct conf_env *env,
			     const struct conf_list *l)
{
	bool may_not_know = env->fx->flags & CONF_F_LIST_NO_TYPE;

	for (size_t i = 0; i < l->n; i++) {
		size_t len = strlen(l->keys[i]);
		uint32_t type = l->info[i].mode & S_IFMT;

		if (l->is_prefix[i] || l->keys[i][len - 1] == '/')
			continue;
		assert_int_equal(l->info[i].size, len);
		if (!(may_not_know && type == 0))
			assert_int_equal(type, S_IFREG);
	}
}

void conf_test_list_delimiter(void **state)
{
	static const char *const root[] = {"t/", "top"};
	static const char *const t[] = {"t/a.txt", "t/b-x", "t/b/",	 "t/c/",
					"t/d/",	   "t/z",   "t/\xc3\xa9"};
	static const char *const tb[] = {"t/b/1", "t/b/2", "t/b/c/"};
	static const char *const td[] = {"t/d/e"};
	static const char *const tbc[] = {"t/b/c/3"};
	struct conf_env *env = *state;
	struct conf_list l = {0};
	struct smux_error err;

	conf_put_tree(env);
	CONF_EXPECT_LIST(env, "", "/", root, N_OF(root));
	CONF_EXPECT_LIST(env, "t/", "/", t, N_OF(t));
	CONF_EXPECT_LIST(env, "t/b/", "/", tb, N_OF(tb));
	CONF_EXPECT_LIST(env, "t/b/c/", "/", tbc, N_OF(tbc));
	/* Folded, a directory is not an entry of itself, marker or not. */
	CONF_EXPECT_LIST(env, "t/d/", "/", td, N_OF(td));
	CONF_EXPECT_LIST(env, "t/c/", "/", NULL, 0);

	CONF_OK(conf_list_collect(env, "t/", "/", &l, &err), &err);
	conf_check_infos(env, &l);
	conf_list_free(&l);
}

void conf_test_list_flat(void **state)
{
	/* Every object, and the marker of the empty directory only. */
	static const char *const all[] = {
		"t/a.txt", "t/b-x", "t/b/1", "t/b/2",	   "t/b/c/3",
		"t/c/",	   "t/d/e", "t/z",   "t/\xc3\xa9", "top",
	};
	static const char *const tb[] = {"t/b/1", "t/b/2", "t/b/c/3"};
	static const char *const tc[] = {"t/c/"};
	static const char *const tde[] = {"t/d/e"};
	struct conf_env *env = *state;
	struct conf_list l = {0};
	struct smux_error err;

	conf_put_tree(env);
	CONF_EXPECT_LIST(env, "", NULL, all, N_OF(all));
	CONF_EXPECT_LIST(env, "t/b/", NULL, tb, N_OF(tb));
	/* Unfolded, an empty directory's marker is listed under itself. */
	CONF_EXPECT_LIST(env, "t/c/", NULL, tc, N_OF(tc));
	CONF_EXPECT_LIST(env, "t/d/", NULL, tde, N_OF(tde));

	CONF_OK(conf_list_collect(env, "", NULL, &l, &err), &err);
	conf_check_infos(env, &l);
	conf_list_free(&l);
}

void conf_test_list_prefixes(void **state)
{
	static const char *const tb_d[] = {"t/b-x", "t/b/"};
	static const char *const tb_f[] = {"t/b-x", "t/b/1", "t/b/2",
					   "t/b/c/3"};
	static const char *const ta[] = {"t/a.txt"};
	static const char *const td[] = {"t/d/"};
	static const char *const tc[] = {"t/c/"};
	static const char *const to[] = {"top"};
	struct conf_env *env = *state;

	conf_put_tree(env);
	/* A prefix that ends mid-name filters names. */
	CONF_EXPECT_LIST(env, "t/b", "/", tb_d, N_OF(tb_d));
	CONF_EXPECT_LIST(env, "t/b", NULL, tb_f, N_OF(tb_f));
	CONF_EXPECT_LIST(env, "t/a", "/", ta, N_OF(ta));
	CONF_EXPECT_LIST(env, "t/a.txt", "/", ta, N_OF(ta));
	CONF_EXPECT_LIST(env, "t/d", "/", td, N_OF(td));
	CONF_EXPECT_LIST(env, "t/c", "/", tc, N_OF(tc));
	CONF_EXPECT_LIST(env, "to", "/", to, N_OF(to));
	/* Prefixes that name nothing list nothing, successfully. */
	CONF_EXPECT_LIST(env, "nope/", "/", NULL, 0);
	CONF_EXPECT_LIST(env, "nope/", NULL, NULL, 0);
	CONF_EXPECT_LIST(env, "nope", "/", NULL, 0);
	CONF_EXPECT_LIST(env, "t/q", "/", NULL, 0);
	CONF_EXPECT_LIST(env, "t/b/c/3/", "/", NULL, 0); /* under an object */
}

struct conf_reenter {
	struct conf_env *env;
	unsigned seen;
	int failures;
};

/* Heads every listed object and stores a key elsewhere, mid-listing. */
static int conf_reenter_cb(void *arg, const struct smux_list_entry *e)
{
	struct conf_reenter *r = arg;
	struct smux_error err;
	struct smux_info info;
	char key[32];

	r->seen++;
	if (!e->is_prefix &&
	    smux_backend_head(r->env->b, &r->env->ctx, e->key, &info, &err))
		r->failures++;
	(void)snprintf(key, sizeof(key), "u/k%u", r->seen);
	if (smux_backend_put_buf(r->env->b, &r->env->ctx, key, "u", 1, &err))
		r->failures++;
	return 0;
}

void conf_test_list_stop(void **state)
{
	static const char *const t2[] = {"t/a.txt", "t/b-x"};
	struct conf_env *env = *state;
	struct conf_reenter r = {.env = env};
	struct conf_list l = {0};
	struct smux_error err;

	conf_put_tree(env);
	/* A callback that stops the listing: success, nothing more. */
	l.stop_after = 2;
	CONF_OK(conf_list_collect(env, "t/", "/", &l, &err), &err);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.keys[0], t2[0]);
	assert_string_equal(l.keys[1], t2[1]);
	conf_list_free(&l);
	l.stop_after = 1;
	CONF_OK(conf_list_collect(env, "", NULL, &l, &err), &err);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.keys[0], "t/a.txt");
	conf_list_free(&l);

	/* A callback may call into the same backend (no lock held). */
	CONF_OK(smux_backend_list(env->b, &env->ctx, "t/", "/", conf_reenter_cb,
				  &r, &err),
		&err);
	assert_int_equal(r.seen, 7);
	assert_int_equal(r.failures, 0);
	CONF_EXPECT(env, "u/k7", "u", 1);
}

#define MANY_BIG  700 /* keys in "m/big/", more than a page anywhere */
#define MANY_DIRS 13  /* "m/dNN/" directories of MANY_PER keys */
#define MANY_PER  100
#define MANY	  (MANY_BIG + MANY_DIRS * MANY_PER)
#define MANY_KEY  64

/* Key @i of the many-keys test; ascending in @i. */
static void conf_many_key(char *buf, size_t i)
{
	if (i < MANY_BIG)
		(void)snprintf(buf, MANY_KEY, "m/big/k%04zu", i);
	else
		(void)snprintf(buf, MANY_KEY, "m/d%02zu/k%04zu",
			       (i - MANY_BIG) / MANY_PER,
			       (i - MANY_BIG) % MANY_PER);
}

static void conf_expect_many(const struct conf_list *l, size_t first, size_t n)
{
	char want[MANY_KEY];

	assert_int_equal(l->n, n);
	for (size_t i = 0; i < n; i++) {
		conf_many_key(want, first + i);
		if (strcmp(l->keys[i], want) != 0)
			print_error("entry %zu: got %s, expected %s\n", i,
				    l->keys[i], want);
		assert_string_equal(l->keys[i], want);
		assert_false(l->is_prefix[i]);
	}
}

void conf_test_list_many(void **state)
{
	struct conf_env *env = *state;
	struct conf_list l = {0};
	struct smux_error err;
	char key[MANY_KEY];

	/* Interleaved across directories, so no order comes for free. */
	for (size_t i = 0; i < MANY; i++) {
		conf_many_key(key, (i * 7919) % MANY);
		CONF_PUT(env, key, "", 0, NULL);
	}
	/* Each once, ascending: strictly increasing means no duplicates. */
	CONF_OK(conf_list_collect(env, "m/", NULL, &l, &err), &err);
	conf_expect_many(&l, 0, MANY);
	for (size_t i = 1; i < l.n; i++)
		assert_true(strcmp(l.keys[i - 1], l.keys[i]) < 0);
	conf_list_free(&l);

	CONF_OK(conf_list_collect(env, "m/big/", "/", &l, &err), &err);
	conf_expect_many(&l, 0, MANY_BIG);
	conf_list_free(&l);
	CONF_OK(conf_list_collect(env, "m/d07/", "/", &l, &err), &err);
	conf_expect_many(&l, MANY_BIG + 7 * MANY_PER, MANY_PER);
	conf_list_free(&l);

	/* Folded: one prefix per directory, each once. */
	CONF_OK(conf_list_collect(env, "m/", "/", &l, &err), &err);
	assert_int_equal(l.n, 1 + MANY_DIRS);
	assert_string_equal(l.keys[0], "m/big/");
	for (size_t i = 0; i < MANY_DIRS; i++) {
		(void)snprintf(key, sizeof(key), "m/d%02zu/", i);
		assert_string_equal(l.keys[1 + i], key);
		assert_true(l.is_prefix[1 + i]);
	}
	conf_list_free(&l);

	/* Stopped past the first pages: exactly the first entries. */
	l.stop_after = 1000;
	CONF_OK(conf_list_collect(env, "", NULL, &l, &err), &err);
	conf_expect_many(&l, 0, 1000);
	conf_list_free(&l);
}
