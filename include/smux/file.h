/* SPDX-License-Identifier: MIT */
/*
 * smux/file.h - a backend whose storage is a local directory.
 *
 * Key "a/b/c" is the file <root>/a/b/c; directories are real directories
 * (a key "a/b/" is the directory itself: its marker). Every path is
 * resolved beneath the root with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), so no key and no symlink
 * planted inside the root reaches anything outside it.
 *
 * Put is atomic (temp file, fsync, rename, fsync of the directory); the
 * writer is a temp file renamed into place at commit. Temp files live in
 * one work folder, "<root>/.smuxfs-tmp/", never beside a user's files: it
 * is created at open (mode 0700), never listed, and the key ".smuxfs-tmp"
 * (and anything under it) is INVALID_KEY. Open removes what an earlier
 * run left there (a daemon killed mid-write) unless another live process
 * has the same root open; smux_file_swept() says how many. A user file
 * named ".smux-tmp.*" anywhere is an ordinary file. A root the daemon
 * cannot write to opens all the same (reads work; writes fail naming the
 * missing work folder).
 */
#ifndef SMUX_FILE_H
#define SMUX_FILE_H

#include "smux/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct smux_file_opts {
	const char *path; /* the root directory; must exist */
	bool no_fsync;	  /* skip fsyncs (tests, benchmarks); never default */
	/* never change the root (a read-only mount): no work folder is made
	 * and none is swept; writes fail (PERMISSION_DENIED) */
	bool read_only;
};

/*
 * Opens the backend on @opts->path. Returns 0 and *@out (one reference)
 * or a negative errno with @err naming the path and the reason.
 */
int smux_file_new(const char *name, const struct smux_file_opts *opts,
		  struct smux_backend **out, struct smux_error *err);

/*
 * How many leftover temp files (of an earlier run that died) smux_file_new
 * removed from the work folder of @b; 0 for anything not a file backend.
 */
unsigned smux_file_swept(struct smux_backend *b);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_FILE_H */
