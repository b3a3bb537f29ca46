# SPDX-License-Identifier: MIT
# Helpers of tests/gen/loadable.sh, independent of sframepp's code:
#   layout ORIG NEW ADDED  checks NEW's segments and sections as GNU readelf
#                          prints them against ORIG's after `sframe gen
#                          --loadable` (ADDED: program headers added, 2; or 1
#                          with --repair --loadable, which retargets the
#                          file's PT_GNU_SFRAME)
#   sframe-seg FILE        .sframe's and PT_GNU_SFRAME's "addr off size" check
#                          (readelf): one PT_GNU_SFRAME, equal to .sframe,
#                          inside a PT_LOAD; prints "ADDR SIZE"
#   patch MODE FILE        makes the broken inputs of --repair from a linked
#                          file (ELF64 little-endian, parsed here):
#     note-to-sframe       the first PT_NOTE becomes a PT_GNU_SFRAME covering
#                          .sframe (lld 14 concatenates .sframe sections but
#                          writes no PT_GNU_SFRAME; lld and mold versions that
#                          knew the segment wrote the same concatenation)
#     zero-size            .sframe's sh_size and PT_GNU_SFRAME's sizes 0
#     garbage              .sframe's bytes overwritten (0xa5), sizes kept
import re
import struct
import subprocess
import sys

PT_LOAD, PT_PHDR, PT_NOTE, PT_GNU_SFRAME = 1, 6, 4, 0x6474E554


def readelf(*args):
    return subprocess.run(["readelf", *args], check=True, capture_output=True, text=True).stdout


def segments(path):
    """(type, offset, vaddr, filesz, memsz, flags, align) per program header,
    in table order, and e_phoff, as readelf -lW prints them."""
    out = readelf("-lW", path)
    phoff = int(re.search(r"starting at offset (\d+)", out).group(1))
    segs = []
    for line in out.splitlines():
        m = re.match(r"\s+([A-Z_]+|LOOS\+\S+|0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+"
                     r"(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+([RWE ]+?)\s+(0x[0-9a-f]+|\d+)$", line)
        if m:
            segs.append((m.group(1), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16),
                         int(m.group(5), 16), m.group(6).replace(" ", ""), int(m.group(7), 0)))
    return segs, phoff


def section(path, name):
    """(addr, offset, size, flags) of section `name` (readelf -SW), or None."""
    for line in readelf("-SW", path).splitlines():
        m = re.match(r"\s+\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+"
                     r"([A-Za-z]*)\s", line)
        if m and m.group(1) == name:
            return int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16), m.group(5)
    return None


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def sframe_seg(path):
    segs, _ = segments(path)
    sf = [s for s in segs if s[0] == "GNU_SFRAME"]
    if len(sf) != 1:
        fail(f"{path}: {len(sf)} GNU_SFRAME segments")
    _, off, vaddr, filesz, memsz, _, _ = sf[0]
    sec = section(path, ".sframe")
    if sec is None:
        fail(f"{path}: no .sframe section")
    if (sec[0], sec[1], sec[2]) != (vaddr, off, filesz) or memsz != filesz:
        fail(f"{path}: .sframe addr/off/size {sec[:3]} vs GNU_SFRAME {(vaddr, off, filesz, memsz)}")
    if "A" not in sec[3]:
        fail(f"{path}: .sframe lacks SHF_ALLOC (flags '{sec[3]}')")
    if not any(s[0] == "LOAD" and s[2] <= vaddr and vaddr + filesz <= s[2] + s[3] and s[1] - s[2] == off - vaddr
               for s in segs):
        fail(f"{path}: GNU_SFRAME {(off, vaddr, filesz)} in no PT_LOAD's file-backed part")
    return vaddr, filesz


def layout(orig, new, added):
    so, _ = segments(orig)
    sn, phoff = segments(new)
    if len(sn) != len(so) + added:
        fail(f"{new}: {len(sn)} program headers, want {len(so)} + {added}")
    loads_o = [s for s in so if s[0] == "LOAD"]
    loads_n = [s for s in sn if s[0] == "LOAD"]
    if loads_n[:-1] != loads_o:
        fail(f"{new}: the original PT_LOADs changed: {loads_n[:-1]} vs {loads_o}")
    seg = loads_n[-1]
    _, off, vaddr, filesz, memsz, flags, align = seg
    size_o = len(open(orig, "rb").read())
    if flags != "R" or filesz != memsz:
        fail(f"{new}: new PT_LOAD {seg}: not read-only, or memsz != filesz")
    if align < 4096 or align & (align - 1) or off % align != vaddr % align:
        fail(f"{new}: new PT_LOAD {seg}: offset and address not congruent modulo a page-sized alignment")
    if vaddr < max(s[2] + s[4] for s in loads_o) or off < size_o:
        fail(f"{new}: new PT_LOAD {seg} overlaps the old segments or the old file")
    if [s[2] for s in loads_n] != sorted(s[2] for s in loads_n):
        fail(f"{new}: PT_LOADs not sorted by address")
    # The program-header table in the new segment, PT_PHDR describing it.
    if not off <= phoff < off + filesz or phoff + len(sn) * 56 > off + filesz:
        fail(f"{new}: the program headers (offset {phoff}) are not inside the new PT_LOAD {seg}")
    table_addr = vaddr + (phoff - off)
    phdr = [s for s in sn if s[0] == "PHDR"]
    if any(s[0] == "PHDR" for s in so):
        if len(phdr) != 1 or phdr[0][1:5] != (phoff, table_addr, len(sn) * 56, len(sn) * 56):
            fail(f"{new}: PT_PHDR {phdr} does not describe the table at {phoff} ({len(sn)} entries)")
        if sn[0][0] != "PHDR":
            fail(f"{new}: PT_PHDR is not the first program header")
    # AT_PHDR: kernels >= 5.18 take it from the PT_LOAD holding e_phoff,
    # older ones from the lowest PT_LOAD's bias plus e_phoff: the same.
    low = min(loads_n, key=lambda s: s[2])
    if low[2] - low[1] + phoff != table_addr:
        fail(f"{new}: lowest PT_LOAD's bias + e_phoff = {low[2] - low[1] + phoff:#x}, table at {table_addr:#x}")
    # Every other program header as it was.
    rest = lambda segs: [s for s in segs if s[0] not in ("PHDR", "GNU_SFRAME", "LOAD")]
    if rest(sn) != rest(so):
        fail(f"{new}: other program headers changed")
    sf_addr, sf_size = sframe_seg(new)
    if not vaddr <= sf_addr < sf_addr + sf_size <= vaddr + filesz:
        fail(f"{new}: GNU_SFRAME not in the new PT_LOAD")
    # Every byte of the input past the ELF header kept where it was.
    a, b = open(orig, "rb").read(), open(new, "rb").read()
    if a[64:] != b[64:size_o]:
        fail(f"{new}: bytes of the input changed")
    print(f"table {table_addr:#x} phnum {len(sn)} sframe {sf_addr:#x} {sf_size}")


def patch(mode, path):
    b = bytearray(open(path, "rb").read())
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        fail(f"{path}: not ELF64 little-endian")
    phoff, shoff = struct.unpack_from("<QQ", b, 0x20)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", b, 0x36)
    sh = lambda i: list(struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize))
    strtab = sh(shstrndx)
    name = lambda n: bytes(b[strtab[4] + n:b.index(0, strtab[4] + n)]).decode()
    idx = next((i for i in range(shnum) if name(sh(i)[0]) == ".sframe"), None)
    if idx is None:
        fail(f"{path}: no .sframe")
    s = sh(idx)
    ph = lambda i: list(struct.unpack_from("<IIQQQQQQ", b, phoff + i * phentsize))
    put_ph = lambda i, p: struct.pack_into("<IIQQQQQQ", b, phoff + i * phentsize, *p)
    if mode == "note-to-sframe":
        i = next((i for i in range(phnum) if ph(i)[0] == PT_NOTE), None)
        if i is None:
            fail(f"{path}: no PT_NOTE")
        # p_type p_flags(PF_R) p_offset p_vaddr p_paddr p_filesz p_memsz p_align
        put_ph(i, [PT_GNU_SFRAME, 4, s[4], s[3], s[3], s[5], s[5], 8])
    elif mode == "zero-size":
        s[5] = 0
        struct.pack_into("<IIQQQQIIQQ", b, shoff + idx * shentsize, *s)
        for i in range(phnum):
            p = ph(i)
            if p[0] == PT_GNU_SFRAME:
                p[5] = p[6] = 0
                put_ph(i, p)
    elif mode == "garbage":
        b[s[4]:s[4] + s[5]] = b"\xa5" * s[5]
    else:
        fail(f"unknown patch mode {mode}")
    open(path, "wb").write(b)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "layout":
        layout(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "sframe-seg":
        print("%#x %d" % sframe_seg(sys.argv[2]))
    elif cmd == "patch":
        patch(sys.argv[2], sys.argv[3])
    else:
        fail(f"unknown command {cmd}")
