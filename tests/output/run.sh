#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Outputs of `sframe gen` and `sframe merge` never damage a file: they are
# written to a temporary file beside the destination and renamed, an output
# that is the input is refused (unless gen --in-place), and a failure (full
# disk, read-only directory) leaves every file byte for byte as it was.
# Truth: cmp against copies made before, stat/getcap/os.getxattr for the
# metadata, readelf/objdump for the sections, the programs' own runs.
# Needs root for mount (CI runs as root); a failed mount FAILS the test.
# Usage: run.sh SFRAME_BIN SHARED_DIR WORKDIR
set -uo pipefail
bin=$(readlink -f "$1") shared=$(readlink -f "$2") work=$(readlink -m "$3")
src="$shared/corpus/src"
mounts=()
cleanup() { for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done; }
trap cleanup EXIT
for m in "$work/full" "$work/ro"; do umount "$m" 2>/dev/null; done
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1  # stray outputs land here
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
# same FILE COPY WHAT: FILE must still be byte-identical to COPY.
same() { cmp -s "$1" "$2" && ok || bad "$3: $1 changed"; }
# no_temp DIR WHAT: no temporary file (.NAME.XXXXXX) left behind.
no_temp() { local t; t=$(find "$1" -maxdepth 1 -name '.*.??????' | head -3); [ -z "$t" ] && ok || bad "$2: left $t"; }
# fails WHAT CMD...: CMD must exit with 1 (a clear error, not a signal).
fails() {
  local what=$1; shift
  "$@" >"$work/out.txt" 2>"$work/err.txt"; local rc=$?
  [ $rc -eq 1 ] && ok || bad "$what: exit $rc, want 1 ($(head -c 200 "$work/err.txt"))"
  grep -q '^sframe: ' "$work/err.txt" && ok || bad "$what: no error message"
}

prog="$work/prog"
gcc -O2 -o "$prog" "$src/basic.c" || { bad "compile basic.c"; exit 1; }
want_run=$("$prog" 2>&1; echo "status $?")

# 1. The input as --elf output (was: SIGBUS, input left at 0 bytes).
cp "$prog" "$work/b"
fails "gen --elf b b" "$bin" gen --elf "$work/b" "$work/b"
grep -q -- '--in-place' "$work/err.txt" && ok || bad "gen --elf b b: error does not mention --in-place"
same "$work/b" "$prog" "gen --elf b b"
# 2. The input as -o output (was: the ELF file silently became a raw section).
cp "$prog" "$work/b2"
fails "gen -o b2 b2" "$bin" gen -o "$work/b2" "$work/b2"
same "$work/b2" "$prog" "gen -o b2 b2"
# 3. A hard link to the input is the input; so is a symbolic link.
ln "$work/b2" "$work/b2-link"; ln -s b2 "$work/b2-sym"
fails "gen -o hardlink" "$bin" gen -o "$work/b2-link" "$work/b2"
fails "gen --elf hardlink" "$bin" gen --elf "$work/b2-link" "$work/b2"
fails "gen --elf symlink" "$bin" gen --elf "$work/b2-sym" "$work/b2"
same "$work/b2" "$prog" "gen into a link of the input"
# 4. merge: the output may not be one of its inputs.
"$bin" gen -o "$work/raw" "$prog" >/dev/null 2>&1 && ok || bad "gen -o raw"
cp "$work/raw" "$work/raw.orig"
fails "merge -o raw raw@0" "$bin" merge -o "$work/raw" "$work/raw@0"
same "$work/raw" "$work/raw.orig" "merge -o raw raw@0"
# 4b. Two outputs: when the second fails (FILE has .sframe already, so no
#     --elf copy), the first is not written either.
gcc -O2 -Wa,--gsframe -o "$work/has-sframe" "$src/basic.c" || bad "compile with --gsframe"
echo old > "$work/keep"; cp "$work/keep" "$work/keep.orig"
fails "gen -o keep --elf copy (copy fails)" "$bin" gen -o "$work/keep" --elf "$work/copy" "$work/has-sframe"
same "$work/keep" "$work/keep.orig" "gen -o with a failing --elf"
[ ! -e "$work/copy" ] && ok || bad "gen --elf on a file with .sframe wrote a copy"
no_temp "$work" "refused outputs"

# 5. --in-place: atomic replacement keeping mode, owner and xattrs
#    (security.capability, which the kernel drops on write and chown).
cp "$prog" "$work/c"
chown 1234:5678 "$work/c"; chmod 751 "$work/c"
setcap cap_net_raw+ep "$work/c" || bad "setcap"
python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.sframepp", b"kept")' "$work/c" || bad "setxattr"
ino=$(stat -c %i "$work/c")
"$bin" gen --in-place "$work/c" >/dev/null 2>"$work/err.txt" && ok || bad "gen --in-place: $(cat "$work/err.txt")"
grep -q ' \.sframe ' <(readelf -SW "$work/c") && ok || bad "gen --in-place: no .sframe section"
# (objdump 2.40 reads SFrame v1 only: the section is checked against libdw.)
grep -q 'format ok; DWARF: [1-9][0-9]* functions, [1-9][0-9]* PCs, 0 mismatches$' <("$bin" verify "$work/c" 2>&1 | head -1) &&
  ok || bad "gen --in-place: section does not verify against the DWARF CFI"
[ "$("$work/c" 2>&1; echo "status $?")" = "$want_run" ] && ok || bad "gen --in-place: runs differently"
[ "$(stat -c '%a %u %g' "$work/c")" = "751 1234 5678" ] && ok || bad "gen --in-place: mode/owner $(stat -c '%a %u %g' "$work/c")"
getcap "$work/c" | grep -q 'cap_net_raw=ep' && ok || bad "gen --in-place: capability lost ($(getcap "$work/c"))"
[ "$(python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.sframepp").decode())' "$work/c")" = kept ] && ok ||
  bad "gen --in-place: user xattr lost"
[ "$(stat -c %i "$work/c")" != "$ino" ] && ok || bad "gen --in-place: written in place, not renamed"
fails "gen --in-place on a file with .sframe" "$bin" gen --in-place "$work/c"
fails "gen --in-place --elf OTHER" "$bin" gen --in-place --elf "$work/other" "$prog"
[ ! -e "$work/other" ] && ok || bad "gen --in-place --elf OTHER wrote OTHER"
no_temp "$work" "gen --in-place"

# 6. A new --elf copy takes the input's mode (an executable stays one); a
#    replaced -o file keeps its own mode; a new one gets 0666 less umask.
cp "$prog" "$work/p750"; chmod 750 "$work/p750"
"$bin" gen --elf "$work/p750.copy" "$work/p750" >/dev/null 2>&1 && ok || bad "gen --elf new copy"
[ "$(stat -c %a "$work/p750.copy")" = 750 ] && ok || bad "gen --elf: new copy mode $(stat -c %a "$work/p750.copy"), want 750"
[ "$("$work/p750.copy" 2>&1; echo "status $?")" = "$want_run" ] && ok || bad "gen --elf copy runs differently"
echo old > "$work/r640"; chmod 640 "$work/r640"
"$bin" gen -o "$work/r640" "$prog" >/dev/null 2>&1 && ok || bad "gen -o over a file"
[ "$(stat -c %a "$work/r640")" = 640 ] && ok || bad "gen -o: replaced file mode $(stat -c %a "$work/r640"), want 640"
cmp -s "$work/r640" "$work/raw" && ok || bad "gen -o over a file: wrong bytes"
(umask 027; "$bin" gen -o "$work/r-new" "$prog" >/dev/null 2>&1) && ok || bad "gen -o new"
[ "$(stat -c %a "$work/r-new")" = 640 ] && ok || bad "gen -o: new file mode $(stat -c %a "$work/r-new"), want 640 (umask 027)"
echo old > "$work/m600"; chmod 600 "$work/m600"
"$bin" merge -o "$work/m600" "$work/raw@0" >/dev/null 2>&1 && ok || bad "merge -o over a file"
[ "$(stat -c %a "$work/m600")" = 600 ] && ok || bad "merge -o: replaced file mode $(stat -c %a "$work/m600")"

# 7. -o - writes the section, and only it, to stdout (summary on stderr).
"$bin" gen -o - "$prog" >"$work/raw.stdout" 2>"$work/err.txt" && ok || bad "gen -o -"
cmp -s "$work/raw.stdout" "$work/raw" && ok || bad "gen -o -: stdout is not the section gen -o FILE writes"
grep -q 'functions:' "$work/err.txt" && ok || bad "gen -o -: no summary on stderr"
"$bin" gen --json -o - "$prog" >"$work/raw.stdout" 2>"$work/gen.json" && ok || bad "gen --json -o -"
cmp -s "$work/raw.stdout" "$work/raw" && ok || bad "gen --json -o -: stdout is not the section"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$work/gen.json" && ok || bad "gen --json -o -: no JSON on stderr"
"$bin" merge -o - "$work/raw@0" >"$work/merge.stdout" 2>/dev/null && ok || bad "merge -o -"
cmp -s "$work/merge.stdout" "$work/m600" && ok || bad "merge -o -: stdout differs from merge -o FILE"
"$bin" gen -o /dev/null "$prog" >/dev/null 2>&1 && ok || bad "gen -o /dev/null"
[ -c /dev/null ] && ok || bad "gen -o /dev/null replaced the device"
fails "gen --elf -" "$bin" gen --elf - "$prog"

# 8. A full disk: a 64 KiB tmpfs, filled up. Nothing there may change.
mkdir -p "$work/full"
if ! err=$(mount -t tmpfs -o size=64k tmpfs "$work/full" 2>&1); then
  bad "cannot mount a tmpfs for the full-disk case (needs root): $err"
else
  mounts+=("$work/full")
  cp "$prog" "$work/full/prog" && cp "$work/raw" "$work/full/raw" && cp "$work/raw" "$work/full/merged" || bad "copy to tmpfs"
  dd if=/dev/zero of="$work/full/fill" bs=1k 2>/dev/null  # until ENOSPC
  [ "$(df --output=avail "$work/full" | tail -1 | tr -d ' ')" = 0 ] && ok || bad "tmpfs not full"
  fails "full disk: gen --in-place" "$bin" gen --in-place "$work/full/prog"
  same "$work/full/prog" "$prog" "full disk: gen --in-place"
  fails "full disk: gen --elf new" "$bin" gen --elf "$work/full/copy" "$work/full/prog"
  [ ! -e "$work/full/copy" ] && ok || bad "full disk: gen --elf left a partial copy"
  fails "full disk: gen -o over a file" "$bin" gen --format-version 2 -o "$work/full/raw" "$prog"
  same "$work/full/raw" "$work/raw" "full disk: gen -o"
  fails "full disk: merge -o" "$bin" merge --address 0x1000 -o "$work/full/merged" "$work/raw@0"
  same "$work/full/merged" "$work/raw" "full disk: merge -o"
  no_temp "$work/full" "full disk"
  grep -q 'No space left on device' "$work/err.txt" && ok || bad "full disk: error does not say why: $(cat "$work/err.txt")"
fi

# 9. A read-only directory (a read-only bind mount: root ignores chmod 555).
mkdir -p "$work/ro"
cp "$prog" "$work/ro/prog"; cp "$work/raw" "$work/ro/raw"
if ! err=$(mount --bind "$work/ro" "$work/ro" 2>&1); then
  bad "cannot bind-mount a directory (needs root): $err"
else
  mounts+=("$work/ro")
  if ! err=$(mount -o remount,ro,bind "$work/ro" 2>&1); then
    bad "cannot remount the bind mount read-only: $err"
  else
    touch "$work/ro/x" 2>/dev/null && bad "read-only mount is writable" || ok
    fails "read-only: gen --in-place" "$bin" gen --in-place "$work/ro/prog"
    same "$work/ro/prog" "$prog" "read-only: gen --in-place"
    fails "read-only: gen -o" "$bin" gen --format-version 2 -o "$work/ro/raw" "$prog"
    same "$work/ro/raw" "$work/raw" "read-only: gen -o"
    fails "read-only: merge -o" "$bin" merge --address 0x1000 -o "$work/ro/raw" "$work/raw@0"
    same "$work/ro/raw" "$work/raw" "read-only: merge -o"
  fi
fi

echo "output: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
