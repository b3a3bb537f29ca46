#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Python ctypes smoke test of the C API (include/sframe/sframe.h).

Loads libsframepp.so, opens corpus executables made by GNU ld, and looks up
the first PC of every frame row entry that GNU objdump's golden dump lists,
checking the rules returned against the dump's CFA/FP/RA columns; a PC
below the first function must give SFRAME_E_PC_NOT_COVERED.
Usage: ctypes_smoke.py LIBSFRAMEPP_SO CORPUS_DIR
"""
import ctypes as C
import os
import re
import sys


class Rule(C.Structure):
    _fields_ = [("kind", C.c_uint8), ("base", C.c_uint8), ("flags", C.c_uint8), ("reserved0", C.c_uint8),
                ("regnum", C.c_uint16), ("reserved1", C.c_uint16), ("offset", C.c_int32)]


class Row(C.Structure):
    _fields_ = [("cfa", Rule), ("ra", Rule), ("fp", Rule), ("ra_mangled", C.c_uint8), ("reserved", C.c_uint8 * 3)]


class Fde(C.Structure):
    _fields_ = [("index", C.c_uint32), ("size", C.c_uint32), ("start_pc", C.c_uint64), ("num_fres", C.c_uint32),
                ("fre_offset", C.c_uint32), ("fre_type", C.c_uint8), ("pc_type", C.c_uint8), ("fde_type", C.c_uint8),
                ("pauth_key", C.c_uint8), ("signal", C.c_uint8), ("rep_size", C.c_uint8), ("info", C.c_uint8),
                ("info2", C.c_uint8), ("reserved", C.c_uint64)]


class Fre(C.Structure):
    _fields_ = [("index", C.c_uint32), ("start_offset", C.c_uint32), ("section_offset", C.c_uint32),
                ("encoded_size", C.c_uint32), ("info", C.c_uint8), ("dataword_count", C.c_uint8),
                ("dataword_size", C.c_uint8), ("cfa_base_sp", C.c_uint8), ("reserved", C.c_uint32), ("row", Row)]


class Match(C.Structure):
    _fields_ = [("fde", Fde), ("fre", Fre)]


class Error(C.Structure):
    _fields_ = [("status", C.c_int32), ("fde", C.c_uint32), ("fre", C.c_uint32), ("reserved", C.c_uint32),
                ("offset", C.c_uint64), ("value", C.c_uint64)]


SFRAME_OK, SFRAME_E_PC_NOT_COVERED = 0, 48
RULE_EXPR, FROM_HEADER = 2, 0x2
assert C.sizeof(Fde) == 40 and C.sizeof(Fre) == 64 and C.sizeof(Match) == 104 and C.sizeof(Error) == 32

lib = C.CDLL(sys.argv[1])
lib.sframe_strerror.restype = C.c_char_p
lib.sframe_strerror.argtypes = [C.c_int]
lib.sframe_section_open_elf.argtypes = [C.c_char_p, C.c_char_p, C.POINTER(C.c_void_p), C.POINTER(Error)]
lib.sframe_section_find.argtypes = [C.c_void_p, C.c_uint64, C.POINTER(Match), C.POINTER(Error)]
lib.sframe_section_close.argtypes = [C.c_void_p]
for f in ("sframe_section_open_elf", "sframe_section_find", "sframe_section_close"):
    getattr(lib, f).restype = C.c_int

# objdump's row: start, CFA ("sp+16"), FP ("u" / "c-16"), RA ("f" / "u" / "c-8", maybe "[s]").
ROW = re.compile(r"^    ([0-9a-f]{16})  (\S+)\s+(\S+)\s+(\S+)\s*$")
FUNC = re.compile(r"^    func idx \[(\d+)\]: pc = (0x[0-9a-f]+), size = (\d+) bytes(.*)$")


def slot(rule):
    if rule.kind == RULE_EXPR and not rule.flags & FROM_HEADER:
        return "c%+d" % rule.offset
    return "u"


checked = failed = 0
corpus = sys.argv[2]
for name in ("basic", "cxx", "libdemo.so", "longfn", "signals", "usesolib"):
    path = os.path.join(corpus, "x86_64-v3-linked", name)
    golden = open(path + ".objdump.txt").read().splitlines()
    sec, err = C.c_void_p(), Error()
    st = lib.sframe_section_open_elf(path.encode(), None, C.byref(sec), C.byref(err))
    if st != SFRAME_OK:
        print("FAIL open %s: %s" % (path, lib.sframe_strerror(st).decode()))
        failed += 1
        continue
    mask = False
    first_pc = None
    fixed_ra = any("CFA fixed RA offset" in line for line in golden)
    for line in golden:
        m = FUNC.match(line)
        if m:
            fde_index, fde_pc = int(m.group(1)), int(m.group(2), 16)
            first_pc = fde_pc if first_pc is None else min(first_pc, fde_pc)
            continue
        if "STARTPC" in line:
            mask = "[m]" in line
            continue
        m = ROW.match(line)
        if not m or mask:  # PC-mask rows print block offsets, not PCs
            continue
        pc = int(m.group(1), 16)
        match, err = Match(), Error()
        st = lib.sframe_section_find(sec, pc, C.byref(match), C.byref(err))
        row = match.fre.row
        got = None
        if st == SFRAME_OK:
            cfa = "%s+%d" % ("sp" if match.fre.cfa_base_sp else "fp", row.cfa.offset)
            ra = "f" if fixed_ra else slot(row.ra)
            got = (match.fde.index, cfa, slot(row.fp), ra + ("[s]" if row.ra_mangled else ""))
        want = (fde_index, m.group(2), m.group(3), m.group(4))
        checked += 1
        if got != want:
            failed += 1
            print("FAIL %s pc 0x%x: got %s (status %d), want %s" % (name, pc, got, st, want))
    # Below every function: not covered, and the status names it.
    match, err = Match(), Error()
    st = lib.sframe_section_find(sec, first_pc - 1, C.byref(match), C.byref(err))
    checked += 1
    if st != SFRAME_E_PC_NOT_COVERED or b"no FDE covers" not in lib.sframe_strerror(st):
        failed += 1
        print("FAIL %s pc 0x%x: status %d, want SFRAME_E_PC_NOT_COVERED" % (name, first_pc - 1, st))
    lib.sframe_section_close(sec)

print("ctypes: %d lookups checked, %d failed" % (checked, failed))
sys.exit(1 if failed or checked < 100 else 0)
