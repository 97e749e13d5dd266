#!/usr/bin/env bash
# test_posix_details.sh KIND - the POSIX details posix_diff.c found the
# mount answering differently from the local disk, each a small scenario
# of posix_details.py run on a directory beside the backing directories
# and on the mount; the two outputs must be equal line for line (what is
# expected is what the local filesystem does):
#   fifo_setid                 mkfifo by root keeps set-id and sticky bits
#   chown_unchanged            chown(f, -1, -1) clears setuid (and setgid
#                              with group execute) of a file, not a dir's
#   fsync_unlinked             fsync/fdatasync of a reader of an unlinked
#                              file succeed
#   fsync_clean_mtime          fsync of a descriptor that wrote nothing
#                              leaves mtime as it was
#   unlinked_owner             fstat of an unlinked open file shows its owner
#   unlinked_size_after_writer a reader of an unlinked file shows the size
#                              its last writer left
#   replaced_reader            a reader of a file changed through another
#                              descriptor, then replaced by a rename:
#                              fstat shows its file as it is (size, mode,
#                              nlink 0)
#   open_dir_renamed           a directory descriptor lists its directory
#                              after a rename of its parent
#   removed_dir                a directory descriptor whose directory was
#                              removed (rmdir, or a rename over it): fstat
#                              (nlink 0), fchmod, futimens, an empty
#                              listing, fsync
#   link_chmod_open            a chmod through one name of a file of two
#                              shows through the other while that one is
#                              open for writing
#   link_writer_nameless       a file of two names, one unlinked while
#                              open for writing: the other name shows
#                              what the descriptor writes next
#   gone_creator_owner         the owner a creator gave its file before
#                              close, shown by another descriptor once the
#                              name went (unlink, rename over it)
#   nameless_links_size        both names gone, each open: one's writes
#                              show in the other's fstat
#   link_chown_open            chown through one name clears the set-id
#                              bits another open name shows (and keeps)
#   nameless_link_chmod        chmod/chown through one name shows in
#                              fstat of a descriptor whose name a rename
#                              replaced
#   nameless_link_truncate     what that descriptor truncates or writes
#                              shows through the other name's open file
#   nameless_setattr_link      fchmod, fchown, futimens through a writer
#                              whose name was unlinked: the other name
#                              shows them
#   nameless_reader_chmod      the same through a reader (file only: a
#                              reader holds one replica of a mirror or
#                              failover, which leave it to the handle)
#   link_truncate_other        truncated and written through another
#                              name: an open name's stat shows the size
#   rename_same_file           rename of a name over another name of the
#                              same file does nothing (both stay)
#   removed_cwd                a working directory removed: opening it
#                              succeeds, it lists nothing (ls too), fstat
#                              shows nlink 0
#   link_other_writer          a file of two names open for writing
#                              through each: an O_TRUNC and a write
#                              through one show through the other
#   nameless_other_chown       chown and chmod through a file's name show
#                              in fstat of a descriptor whose name (a
#                              hard link) was unlinked, also after its own
#                              fchown
#   dir_nlink                  a directory's link count follows mkdir and
#                              rmdir inside it at once
#   nameless_writer_after_writer  two writers and a reader of a file
#                              whose name went: one grows it and closes,
#                              the other writes on; fstat of the writer
#                              and the reader show the size now
#   special_unlinked_chown     fchown by root of a FIFO whose name went
#                              clears its set-id bits
#   rename_same_file_unlink    a reader and a writer open by one name of
#                              a file of two; that name renamed over the
#                              other (nothing happens), the other name
#                              unlinked, renamed back, chmod: fstat and
#                              fchmod through both all along
#   special_unlinked           a FIFO and a socket whose names went while
#                              open: fstat (type, mode, owner, nlink 0),
#                              fchmod of the FIFO, its data still flows
# KIND: file (one file backend), mirror or failover of two.
. "$(dirname "$0")/lib.sh"

KIND=${1:?usage: test_posix_details.sh file|mirror|failover}
M=$T/mnt
P=$T/plain

new_config "$T/det.conf" root
case $KIND in
file) cfg_file root "$T/a" ;;
mirror | failover)
	cfg_mux root "$KIND" "a b"
	cfg_file a "$T/a"
	cfg_file b "$T/b"
	;;
*) fail "unknown kind $KIND" ;;
esac
mkdir -p "$P"
mount_smux "$T/det.conf" "$M"
# what a kind leaves out (said in the header)
case $KIND in
mirror | failover) export SMUX_DETAILS_SKIP=nameless_reader_chmod ;;
esac

python3 "$SMUX_REPO/tests/integration/posix_details.py" "$P" >"$T/want"
python3 "$SMUX_REPO/tests/integration/posix_details.py" "$M" >"$T/got"
if ! diff -u "$T/want" "$T/got" >&2; then
	fail "$KIND: the mount answers differently from the local disk (- local, + mount)"
fi
unmount_smux "$M"
log "$KIND: ok"
