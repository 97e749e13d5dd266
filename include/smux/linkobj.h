/* SPDX-License-Identifier: MIT */
/*
 * smux/linkobj.h - symlinks as NAME.rclonelink objects over a backend that
 * stores only regular files (WebDAV, Bunny Storage), the convention of
 * rclone's --links: the object's content is the link's target.
 *
 * The wrapper shows an object "a.rclonelink" as the symlink "a" (head,
 * get, list), stores a symlink put under "a" as that object, and moves,
 * copies and deletes it with its name. Keys ending in ".rclonelink" are
 * its own: they cannot be written through it (ops->key_refused: the
 * wrappers answer INVALID_KEY, and a mux with such a member refuses them
 * too) and read as absent. Where "a" and "a.rclonelink" both exist (written by another
 * client), the regular object "a" is what shows; a delete of "a" removes
 * both. Everything else goes to the inner backend unchanged.
 */
#ifndef SMUX_LINKOBJ_H
#define SMUX_LINKOBJ_H

#include "smux/backend.h"

/* The suffix that marks a symlink's object. */
#define SMUX_LINKOBJ_SUFFIX ".rclonelink"

/* Wraps @inner (takes a reference of its own) under @inner's name. */
int smux_linkobj_new(struct smux_backend *inner, struct smux_backend **out,
		     struct smux_error *err);

#endif
