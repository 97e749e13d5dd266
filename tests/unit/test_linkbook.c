// SPDX-License-Identifier: MIT
/*
 * test_linkbook.c - core/linkbook.h alone: a group is every name linked
 * to a key, directly or through others; renames (of a file, over a name,
 * of a directory) and deletes keep it current; the book comes back from
 * its file after a reopen, the file cut at a bad or unfinished record
 * (said in @why) with the links before it kept; a full book keeps the
 * newest links; non-UTF-8 keys survive the file; a record linking a name
 * to itself is no link.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/linkbook.h"

#define GMAX 16

/* @key's group, sorted and joined by spaces ("" when none), into @out */
static const char *group(struct smux__linkbook *lb, const char *key, char *out,
			 size_t cap)
{
	char *names[GMAX];
	unsigned n = smux__linkbook_group(lb, key, names, GMAX);

	/* insertion sort: the order of a walk is not the test's business */
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i;
		     j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	out[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		size_t len = strlen(out);

		snprintf(out + len, cap - len, "%s%s", i ? " " : "", names[i]);
		free(names[i]);
	}
	return out;
}

#define assert_group(lb, key, want)                                            \
	do {                                                                   \
		char got_[512];                                                \
		assert_string_equal(group(lb, key, got_, sizeof(got_)), want); \
	} while (0)

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_linkbook.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct smux__linkbook *open_book(size_t cap, char *why, size_t whylen)
{
	struct smux__linkbook *lb =
		smux__linkbook_open(dir, "m", cap, why, whylen);

	assert_non_null(lb);
	return lb;
}

static void test_group_rename_forget(void **state)
{
	struct smux__linkbook *lb =
		smux__linkbook_open(NULL, "m", 100, NULL, 0);

	(void)state;
	assert_non_null(lb);
	assert_group(lb, "d/a", "");
	smux__linkbook_link(lb, "d/a", "e/b");
	smux__linkbook_link(lb, "e/b", "f/c"); /* ln e/b f/c: a chain */
	smux__linkbook_link(lb, "x", "y");
	assert_group(lb, "d/a", "e/b f/c");
	assert_group(lb, "f/c", "d/a e/b");
	assert_group(lb, "x", "y");
	/* mv e/b g: the name moves, the file keeps its names */
	smux__linkbook_rename(lb, "e/b", "g");
	assert_group(lb, "d/a", "f/c g");
	assert_group(lb, "e/b", "");
	/* mv x f/c: f/c is x's file now, y's partner; d/a's group lost it */
	smux__linkbook_rename(lb, "x", "f/c");
	assert_group(lb, "d/a", "g");
	assert_group(lb, "y", "f/c");
	/* rm g: d/a and what g linked stay together (g was the middle) */
	smux__linkbook_link(lb, "g", "h/i");
	smux__linkbook_forget(lb, "g");
	assert_group(lb, "d/a", "h/i");
	assert_group(lb, "g", "");
	/* mv h k (a directory): names under it move; none under k stays */
	smux__linkbook_link(lb, "k/old", "z");
	smux__linkbook_rename(lb, "h/", "k/");
	assert_group(lb, "d/a", "k/i");
	assert_group(lb, "z", "");
	assert_group(lb, "k/i", "d/a");
	/* a key linked to itself, or a directory renamed to a file: nothing */
	smux__linkbook_link(lb, "q", "q");
	assert_group(lb, "q", "");
	smux__linkbook_rename(lb, "k/", "kfile");
	assert_group(lb, "k/i", "d/a");
	smux__linkbook_close(lb);
}

static void test_reopen_and_cut(void **state)
{
	char why[512], path[128];
	struct smux__linkbook *lb;
	FILE *f;

	(void)state;
	lb = open_book(100, why, sizeof(why));
	assert_string_equal(why, "");
	smux__linkbook_link(lb, "d/a", "e/b");
	smux__linkbook_link(lb, "d/\xff", "e/c"); /* not UTF-8 */
	smux__linkbook_rename(lb, "e/", "n/");
	smux__linkbook_forget(lb, "zzz"); /* not in the book: no record */
	smux__linkbook_close(lb);

	lb = open_book(100, why, sizeof(why));
	assert_string_equal(why, "");
	assert_group(lb, "d/a", "n/b");
	assert_group(lb, "n/c", "d/\xff");
	smux__linkbook_close(lb);

	/* a torn last record (a crash mid-write), then garbage: the book
	 * keeps what came before, says where it was cut, and later records
	 * follow whole ones */
	snprintf(path, sizeof(path), "%s/m.links", dir);
	f = fopen(path, "a");
	assert_non_null(f);
	fputs("{\"op\":\"link\",\"a\":\"p\",\"b\":\"q\"}\n", f);
	/* a directory renamed to itself: nothing moves, nothing is lost */
	fputs("{\"op\":\"rename\",\"from\":\"d/\",\"to\":\"d/\"}\n", f);
	/* a name linked to itself: no link, and no harm (it crashed) */
	fputs("{\"op\":\"link\",\"a\":\"x\",\"b\":\"x\"}\n", f);
	fputs("{\"op\":\"link\",\"a\":\"../etc\",\"b\":\"q\"}\n", f);
	fputs("{\"op\":\"link\",\"a\":\"r\",\"b\":\"s\"}\n", f);
	fputs("{\"op\":\"li", f);
	fclose(f);
	lb = open_book(100, why, sizeof(why));
	assert_non_null(strstr(why, "m.links line 7"));
	assert_non_null(strstr(why, "not a key"));
	assert_group(lb, "p", "q");
	assert_group(lb, "x", "");
	assert_group(lb, "r", "");
	assert_group(lb, "d/a", "n/b");
	smux__linkbook_link(lb, "t", "u");
	smux__linkbook_close(lb);
	lb = open_book(100, why, sizeof(why));
	assert_string_equal(why, "");
	assert_group(lb, "t", "u");
	assert_group(lb, "p", "q");
	smux__linkbook_close(lb);

	/* not JSON at all */
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("\x01\x02 not json\n", f);
	fclose(f);
	lb = open_book(100, why, sizeof(why));
	assert_non_null(strstr(why, "line 1"));
	assert_group(lb, "t", "");
	smux__linkbook_close(lb);
}

static void test_full_and_rewrite(void **state)
{
	char why[512], a[32], b[32], path[128];
	struct smux__linkbook *lb;
	struct stat st;

	(void)state;
	snprintf(path, sizeof(path), "%s/m.links", dir);
	unlink(path);
	lb = open_book(64, why, sizeof(why));
	for (int i = 0; i < 200; i++) {
		snprintf(a, sizeof(a), "a/%d", i);
		snprintf(b, sizeof(b), "b/%d", i);
		smux__linkbook_link(lb, a, b);
	}
	/* the newest are kept, the oldest forgotten */
	assert_group(lb, "a/199", "b/199");
	assert_group(lb, "a/0", "");
	/* renames and deletes of the same names, many times: the file is
	 * rewritten, its size bounded by the book's */
	for (int i = 0; i < 6000; i++) {
		smux__linkbook_link(lb, "x/1", "y/1");
		smux__linkbook_forget(lb, "x/1");
	}
	smux__linkbook_close(lb);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size < (off_t)512 * 1024);
	lb = open_book(64, why, sizeof(why));
	assert_string_equal(why, "");
	assert_group(lb, "a/199", "b/199");
	assert_group(lb, "y/1", "");
	smux__linkbook_close(lb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_rename_forget),
		cmocka_unit_test(test_reopen_and_cut),
		cmocka_unit_test(test_full_and_rewrite),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
