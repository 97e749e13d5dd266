// SPDX-License-Identifier: MIT
/*
 * main.c - runs the conformance suite: every test of conf_tests[] once per
 * fixture of registry.c, one cmocka group per fixture so each backend gets
 * its own summary. SMUX_CONF_FIXTURE=name runs one fixture only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "conformance/conformance.h"

#define CONF_TEST(fn) \
	cmocka_unit_test_setup_teardown(fn, conf_env_setup, conf_env_teardown)

static const struct CMUnitTest conf_tests[] = {
	CONF_TEST(conf_test_roundtrip),
	CONF_TEST(conf_test_roundtrip_empty),
	CONF_TEST(conf_test_overwrite),
	CONF_TEST(conf_test_put_opts),
	CONF_TEST(conf_test_ranged_get),
	CONF_TEST(conf_test_if_match),
	CONF_TEST(conf_test_head),
	CONF_TEST(conf_test_missing),
	CONF_TEST(conf_test_directories),
	CONF_TEST(conf_test_delete),
	CONF_TEST(conf_test_delete_many),
	CONF_TEST(conf_test_copy),
	CONF_TEST(conf_test_healthcheck),
	CONF_TEST(conf_test_statfs),
	CONF_TEST(conf_test_invalid_keys),
	CONF_TEST(conf_test_key_nul),
	CONF_TEST(conf_test_longest_keys),
	CONF_TEST(conf_test_list_delimiter),
	CONF_TEST(conf_test_list_flat),
	CONF_TEST(conf_test_list_prefixes),
	CONF_TEST(conf_test_list_stop),
	CONF_TEST(conf_test_list_many),
	CONF_TEST(conf_test_writer),
	CONF_TEST(conf_test_writer_reopen),
	CONF_TEST(conf_test_reader),
	CONF_TEST(conf_test_concurrent_same_key),
	CONF_TEST(conf_test_concurrent_keys),
	CONF_TEST(conf_test_rename),
	CONF_TEST(conf_test_setattr),
	CONF_TEST(conf_test_symlink),
	CONF_TEST(conf_test_sync),
	CONF_TEST(conf_test_xattr),
	CONF_TEST(conf_test_large_object),
};

int main(void)
{
	const char *only = getenv("SMUX_CONF_FIXTURE");
	struct CMUnitTest tests[sizeof(conf_tests) / sizeof(conf_tests[0])];
	int failed = 0, ran = 0;
	size_t n;

	for (size_t f = 0; f < conf_fixture_count; f++) {
		const struct conf_fixture *fx = &conf_fixtures[f];

		if (only && *only && strcmp(only, fx->name) != 0)
			continue;
		if ((fx->flags & CONF_F_OPT_IN) && !(only && *only))
			continue;
		/* cmocka 1.1 names groups in XML output only; say which. */
		print_message("[==========] conformance fixture: %s\n",
			      fx->name);
		/* Each test's setup receives its fixture as initial state. */
		n = 0;
		for (size_t i = 0;
		     i < sizeof(conf_tests) / sizeof(conf_tests[0]); i++) {
			/* a fixture out of the large case's scope does not
			 * register it (registry.c says why), rather than skip */
			if ((fx->flags & CONF_F_NO_LARGE) &&
			    conf_tests[i].test_func == conf_test_large_object)
				continue;
			tests[n] = conf_tests[i];
			tests[n++].initial_state = (void *)fx;
		}
		failed +=
			_cmocka_run_group_tests(fx->name, tests, n, NULL, NULL);
		ran++;
	}
	if (!ran) {
		(void)fprintf(stderr, "no fixture named \"%s\"\n", only);
		return 1;
	}
	return failed ? 1 : 0;
}
