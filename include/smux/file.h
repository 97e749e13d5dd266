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
 * writer is a temp file beside the target renamed into place at commit.
 * Temp files are named ".smux-tmp.*" and never listed.
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
};

/*
 * Opens the backend on @opts->path. Returns 0 and *@out (one reference)
 * or a negative errno with @err naming the path and the reason.
 */
int smux_file_new(const char *name, const struct smux_file_opts *opts,
		  struct smux_backend **out, struct smux_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_FILE_H */
