// SPDX-License-Identifier: MIT
/*
 * test_fill_stat.c - what stat shows of a backend's attributes
 * (smuxfs_fill_stat, src/fs/ops.c) when they are out of any file's range:
 * a server's listing or PROPFIND may say a size of 2^63 - 1 or more
 * (outside tester s40-t2: a getcontentlength of 9223372036854775807). The
 * size shows as the largest off_t and its blocks are counted without a
 * signed overflow (under UBSan, (size + 511) / 512 stopped the daemon).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"

static void test_huge_sizes(void **state)
{
	static const uint64_t sizes[] = {(uint64_t)INT64_MAX,
					 (uint64_t)INT64_MAX + 1, UINT64_MAX};
	struct smuxfs fs;
	struct smux_info info;
	struct stat st;

	(void)state;
	memset(&fs, 0, sizeof(fs));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		smux_info_clear(&info);
		info.mode = S_IFREG | 0644;
		info.size = sizes[i];
		smuxfs_fill_stat(&fs, &st, false, &info);
		assert_true(st.st_size == INT64_MAX);
		assert_true(st.st_blocks == INT64_MAX / 512 + 1);
		info.blocks = sizes[i];
		info.has_blocks = true;
		smuxfs_fill_stat(&fs, &st, false, &info);
		assert_true(st.st_blocks == INT64_MAX);
	}
	/* an ordinary one as before */
	info.size = 513;
	info.has_blocks = false;
	smuxfs_fill_stat(&fs, &st, false, &info);
	assert_true(st.st_size == 513);
	assert_true(st.st_blocks == 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_huge_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
