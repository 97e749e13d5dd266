/* SPDX-License-Identifier: MIT */
/*
 * linkbook.h (internal) - a mux's book of the hard links made through it:
 * which names were linked to which, kept across restarts in
 * <state_dir>/<mux>.links.
 *
 * Why: a replay that writes a replica's copy of a file of several names
 * must know all of that file's names on both replicas, or it splits the
 * replica's copy (a file of its own for the replayed name: later writes
 * through another name no longer reach it there) or writes bytes into a
 * name of another file (mux_repair.c same_group). A listing finds the
 * names in the key's own directory; the book names the others (d/a and
 * e/b of `ln d/a e/b`, cp -al, git's local clone). A name the book gives
 * is a candidate only: the replay checks on each replica that it is that
 * file. So a stale entry (a name unlinked or renamed behind the mount)
 * costs a lookup, never a wrong write (a lookup refused for good makes
 * it no name: mux_repair.c group_add_if), and a lost one (a crash before
 * its record reached the disk, a full book) only the split a replay made
 * before there was a book.
 *
 * Renames and deletes made through the mux keep it current (a renamed
 * name keeps its links; the names linked through a deleted one stay
 * linked to each other). At most @cap links are kept (when full, the
 * older half is forgotten); the file is rewritten when it holds far
 * more records than links.
 *
 * Owner: linkbook.c. User: the mux (mux.c records, mux_repair.c asks).
 * Every function may run on any thread at once (one mutex inside); none
 * fails: without memory or disk the book only knows less.
 */
#ifndef SMUX_CORE_LINKBOOK_H
#define SMUX_CORE_LINKBOOK_H

#include <stddef.h>

struct smux__linkbook;

/*
 * The book of the mux @mux_name (a name the hint journal took) in
 * @state_dir, NULL: in memory only. A file it cannot read or write, or
 * one with a bad record (cut there: what follows is lost), is said in
 * @why (empty when all is well). NULL without memory.
 */
struct smux__linkbook *smux__linkbook_open(const char *state_dir,
					   const char *mux_name, size_t cap,
					   char *why, size_t whylen);

/* Frees @lb; NULL is a no-op. No other call may be running on it. */
void smux__linkbook_close(struct smux__linkbook *lb);

/* @a and @b (keys of files) were linked: names of one file. */
void smux__linkbook_link(struct smux__linkbook *lb, const char *a,
			 const char *b);

/* @from was renamed @to: both keys of files, or both directory markers
 * ("d/", every name under it moves). A name @to had is gone. */
void smux__linkbook_rename(struct smux__linkbook *lb, const char *from,
			   const char *to);

/* The name @key (a file's) was deleted. */
void smux__linkbook_forget(struct smux__linkbook *lb, const char *key);

/*
 * The names linked to @key, directly or through other names (not @key
 * itself), nearest first: at most @max new strings into @out, which the
 * caller frees. Returns how many.
 */
unsigned smux__linkbook_group(struct smux__linkbook *lb, const char *key,
			      char **out, unsigned max);

#endif /* SMUX_CORE_LINKBOOK_H */
