// SPDX-License-Identifier: MIT
/*
 * test_keynotes.c - core/keynotes.h alone: a note comes back as put, is
 * dropped (always, or only when it is the one named), is lost to a key
 * taking its slot, and is not seen past its time (a time of 0: none).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/keynotes.h"

static void test_put_get_drop(void **state)
{
	struct smux__keynotes *kn =
		smux__keynotes_new(64, sizeof(int), 60LL * 1000000000LL);
	int a = 1, b = 2, got = 0;

	(void)state;
	assert_non_null(kn);
	assert_false(smux__keynotes_get(kn, "k", &got));
	smux__keynotes_put(kn, "k", &a, NULL);
	assert_true(smux__keynotes_get(kn, "k", &got));
	assert_int_equal(got, 1);
	/* dropped only when it is the note named */
	smux__keynotes_put(kn, "k", NULL, &b);
	assert_true(smux__keynotes_get(kn, "k", &got));
	smux__keynotes_put(kn, "k", NULL, &a);
	assert_false(smux__keynotes_get(kn, "k", &got));
	/* dropped whatever it is */
	smux__keynotes_put(kn, "k", &b, NULL);
	smux__keynotes_put(kn, "other", NULL, NULL);
	assert_true(smux__keynotes_get(kn, "k", &got));
	assert_int_equal(got, 2);
	smux__keynotes_put(kn, "k", NULL, NULL);
	assert_false(smux__keynotes_get(kn, "k", &got));
	smux__keynotes_free(kn);
	/* no table: nothing noted, nothing seen */
	smux__keynotes_put(NULL, "k", &a, NULL);
	assert_false(smux__keynotes_get(NULL, "k", &got));
	smux__keynotes_free(NULL);
}

static void test_slot_and_time(void **state)
{
	struct smux__keynotes *one =
		smux__keynotes_new(1, 3, 60LL * 1000000000LL);
	struct smux__keynotes *none = smux__keynotes_new(8, 3, 0);
	char got[3];

	(void)state;
	assert_non_null(one);
	assert_non_null(none);
	/* one slot: the second key takes it; the first's note is gone and
	 * a drop of the first leaves the second's */
	smux__keynotes_put(one, "a", "aaa", NULL);
	smux__keynotes_put(one, "b", "bbb", NULL);
	assert_false(smux__keynotes_get(one, "a", got));
	smux__keynotes_put(one, "a", NULL, NULL);
	assert_true(smux__keynotes_get(one, "b", got));
	assert_memory_equal(got, "bbb", 3);
	/* a time of 0: a note is never seen */
	smux__keynotes_put(none, "a", "aaa", NULL);
	assert_false(smux__keynotes_get(none, "a", got));
	smux__keynotes_free(one);
	smux__keynotes_free(none);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_drop),
		cmocka_unit_test(test_slot_and_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
