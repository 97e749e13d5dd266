// SPDX-License-Identifier: MIT
/*
 * support/fork_child.c - see fork_child.h.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/fork_child.h"

void fc_run_child(void (*child)(int report_fd), char *got, size_t cap)
{
	int rep[2];
	pid_t pid;
	int status;
	ssize_t n;
	size_t len = 0;

	assert_int_equal(pipe(rep), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(rep[0]);
		child(rep[1]);
		_exit(95); /* the child ends the process itself */
	}
	close(rep[1]);
	while (len + 1 < cap &&
	       (n = read(rep[0], got + len, cap - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		assert_true(n > 0);
		len += (size_t)n;
	}
	got[len] = '\0';
	close(rep[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}
