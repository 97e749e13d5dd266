/* SPDX-License-Identifier: MIT */
/*
 * support/fork_child.h - running one test case in a forked child that
 * reports what it saw through a pipe, for what only an exiting process
 * shows (exit handlers, threads still running at exit).
 */
#ifndef SMUX_TESTS_SUPPORT_FORK_CHILD_H
#define SMUX_TESTS_SUPPORT_FORK_CHILD_H

#include <stddef.h>

/*
 * Forks; the child calls @child(@report_fd), which writes its report to
 * @report_fd (the write end of a pipe) and ends the process itself
 * (returning from main through exit(), or _exit with a code); should it
 * return, the child _exits 95. The parent reads every byte reported into
 * @got (at most @cap - 1, NUL-terminated), waits for the child and
 * asserts (cmocka) that it exited with status 0.
 */
void fc_run_child(void (*child)(int report_fd), char *got, size_t cap);

#endif /* SMUX_TESTS_SUPPORT_FORK_CHILD_H */
