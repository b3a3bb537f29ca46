# SPDX-License-Identifier: MIT
# Helpers of tests/gen/loadable.sh, independent of sframepp's code:
#   layout ORIG NEW ADDED  checks NEW's segments and sections as GNU readelf
#                          prints them against ORIG's after `sframe gen
#                          --loadable` (ADDED: program headers added, 2; or 1
#                          with --repair --loadable, which retargets the
#                          file's PT_GNU_SFRAME); prints "table 0xA phnum N
#                          sframe 0xS SIZE LAYOUT", LAYOUT "in-place" (the
#                          table grown where it was, the sections after it
#                          moved up, each with its bytes, every header and
#                          dynamic address following them) or "moved" (the
#                          table at the start of the new segment)
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


def sections(path):
    """name -> (addr, offset, size, flags) of every section (readelf -SW)."""
    out = {}
    for line in readelf("-SW", path).splitlines():
        m = re.match(r"\s+\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+"
                     r"([A-Za-z]*)\s", line)
        if m and m.group(2) != "NOBITS":
            out.setdefault(m.group(1), (int(m.group(3), 16), int(m.group(4), 16), int(m.group(5), 16), m.group(6)))
    return out


def dynamic(path):
    """(tag, value) of each readelf -dW entry whose value is a hex number."""
    return [(m.group(1), int(m.group(2), 16)) for m in
            (re.match(r"\s+0x[0-9a-f]+\s+\((\w+)\)\s+(0x[0-9a-f]+)$", line)
             for line in readelf("-dW", path).splitlines()) if m]


def symbols(path):
    """(table, value, section index, name) of every symbol (readelf -sW)."""
    out, table = [], None
    for line in readelf("-sW", path).splitlines():
        m = re.match(r"Symbol table '(\S+)'", line)
        if m:
            table = m.group(1)
        m = re.match(r"\s+\d+:\s+([0-9a-f]+)\s+\d+\s+\w+\s+\w+\s+\w+\s+(\w+)\s*(\S*)", line)
        if m:
            out.append((table, int(m.group(1), 16), m.group(2), m.group(3)))
    return out


def section_names(path):
    """Section index (as readelf -sW prints it) -> name."""
    return {m.group(1): m.group(2) for m in (re.match(r"\s+\[\s*(\d+)\]\s+(\S+)", line)
                                             for line in readelf("-SW", path).splitlines()) if m}


def where(secs, addr):
    """(section name, offset in it) of a loaded address, or None."""
    for name, (a, _, size, flags) in secs.items():
        if "A" in flags and a <= addr < a + size:
            return name, addr - a
    return None


def layout(orig, new, added):
    so, phoff_o = segments(orig)
    sn, phoff = segments(new)
    a, b = open(orig, "rb").read(), open(new, "rb").read()
    if len(sn) != len(so) + added:
        fail(f"{new}: {len(sn)} program headers, want {len(so)} + {added}")
    loads_o = [s for s in so if s[0] == "LOAD"]
    loads_n = [s for s in sn if s[0] == "LOAD"]
    seg = loads_n[-1]
    _, off, vaddr, filesz, memsz, flags, align = seg
    size_o = len(a)
    if flags != "R" or filesz != memsz:
        fail(f"{new}: new PT_LOAD {seg}: not read-only, or memsz != filesz")
    if align < 4096 or align & (align - 1) or off % align != vaddr % align:
        fail(f"{new}: new PT_LOAD {seg}: offset and address not congruent modulo a page-sized alignment")
    if vaddr < max(s[2] + s[4] for s in loads_o) or off < size_o:
        fail(f"{new}: new PT_LOAD {seg} overlaps the old segments or the old file")
    if [s[2] for s in loads_n] != sorted(s[2] for s in loads_n):
        fail(f"{new}: PT_LOADs not sorted by address")
    holder = next((s for s in loads_n if s[1] <= phoff and phoff + len(sn) * 56 <= s[1] + s[3]), None)
    if holder is None:
        fail(f"{new}: the program headers (offset {phoff}, {len(sn)} entries) are in no PT_LOAD")
    table_addr = holder[2] + (phoff - holder[1])
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
    sf_addr, sf_size = sframe_seg(new)
    if not vaddr <= sf_addr < sf_addr + sf_size <= vaddr + filesz:
        fail(f"{new}: GNU_SFRAME not in the new PT_LOAD")
    rest = lambda segs: [s for s in segs if s[0] not in ("PHDR", "GNU_SFRAME", "LOAD")]
    if phoff != phoff_o:
        # The table moved to the start of the new segment (no room in place).
        if holder != seg:
            fail(f"{new}: the moved program headers are not in the new PT_LOAD {seg}")
        if loads_n[:-1] != loads_o or rest(sn) != rest(so):
            fail(f"{new}: program headers other than PT_PHDR changed")
        if a[64:] != b[64:size_o]:
            fail(f"{new}: bytes of the input changed")
        print(f"table {table_addr:#x} phnum {len(sn)} sframe {sf_addr:#x} {sf_size} moved")
        return
    # The table grown in place (strip and objcopy keep it there): only the
    # PT_LOAD holding it may grow, over bytes and pages no other uses.
    if sf_addr != vaddr:
        fail(f"{new}: .sframe at {sf_addr:#x}, not at the start of its PT_LOAD {seg}")
    grown = None
    for o, n in zip(loads_o, loads_n[:-1]):
        if o != n:
            if grown or o[:3] != n[:3] or o[5:] != n[5:] or n[3] < o[3] or n[3] != n[4] or o[3] != o[4]:
                fail(f"{new}: PT_LOAD {o} became {n}")
            grown = n
    if grown:
        end = grown[1] + grown[3]
        if any(s != grown and s[1] < end and s[1] + s[3] > grown[1] for s in loads_n) or end > size_o:
            fail(f"{new}: the grown PT_LOAD {grown} overlaps another's file bytes or passes the file's end")
        page = max(s[6] for s in loads_o)
        if any(s[2] > grown[2] and s[2] // page * page < grown[2] + grown[4] for s in loads_n):
            fail(f"{new}: the grown PT_LOAD {grown} reaches a page another PT_LOAD maps")
    # Every address the dynamic section holds names the same place; its
    # bytes are then compared as the input's.
    sec_o, sec_n = sections(orig), sections(new)
    dyn_o, dyn_n = dynamic(orig), dynamic(new)
    if [t for t, _ in dyn_o] != [t for t, _ in dyn_n]:
        fail(f"{new}: dynamic tags changed")
    for (t, vo), (_, vn) in zip(dyn_o, dyn_n):
        if vo != vn and (where(sec_o, vo) is None or where(sec_o, vo) != where(sec_n, vn)):
            fail(f"{new}: dynamic {t} {vo:#x} became {vn:#x}: not the same place")
    b = bytearray(b)
    if ".dynamic" in sec_o and ".dynamic" in sec_n:
        _, d_off, d_size, _ = sec_n[".dynamic"]
        b[d_off:d_off + d_size] = a[sec_o[".dynamic"][1]:sec_o[".dynamic"][1] + d_size]
    ro, rn = rest(so), rest(sn)
    for o, n in zip(ro, rn):
        # Moved or not: the same header over the same bytes.
        if (o[0], o[3], o[4], o[5], o[6]) != (n[0], n[3], n[4], n[5], n[6]) or o[2] - o[1] != n[2] - n[1] or \
                a[o[1]:o[1] + o[3]] != b[n[1]:n[1] + n[3]]:
            fail(f"{new}: {o} became {n}, or its bytes changed")
    for name, (addr, offset, size, fl) in sec_o.items():
        if name in (".sframe", ".shstrtab"):
            continue
        n = sec_n.get(name)
        if n is None or n[2] != size or n[3] != fl or (n[0] - addr != n[1] - offset and "A" in fl):
            fail(f"{new}: section {name} {(addr, offset, size, fl)} became {n}")
        if a[offset:offset + size] != b[n[1]:n[1] + size] and name not in (".symtab", ".dynsym"):
            fail(f"{new}: the bytes of {name} changed")
    # Every symbol keeps its place in its section; the symbol tables'
    # bytes are then compared as the input's.
    idx = section_names(orig)
    sym_o, sym_n = symbols(orig), symbols(new)
    if [(t, x, n) for t, _, x, n in sym_o] != [(t, x, n) for t, _, x, n in sym_n]:
        fail(f"{new}: the symbols changed")
    for (t, vo, x, name), (_, vn, _, _) in zip(sym_o, sym_n):
        sec = idx.get(x)
        if vo != vn and (sec not in sec_o or vo - sec_o[sec][0] != vn - sec_n[sec][0]):
            fail(f"{new}: {t} symbol {name} {vo:#x} became {vn:#x}: not the same place")
    for name in (".symtab", ".dynsym"):
        if name in sec_o and name in sec_n:
            b[sec_n[name][1]:sec_n[name][1] + sec_o[name][2]] = a[sec_o[name][1]:sec_o[name][1] + sec_o[name][2]]
    # Past the grown segment, every input byte where it was.
    keep = grown[1] + grown[3] if grown else phoff + len(sn) * 56
    if a[keep:] != b[keep:size_o]:
        fail(f"{new}: bytes of the input past {keep:#x} changed")
    print(f"table {table_addr:#x} phnum {len(sn)} sframe {sf_addr:#x} {sf_size} in-place")


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
