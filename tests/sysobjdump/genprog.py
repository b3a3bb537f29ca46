#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes C and C++ sources with many functions of varied frame shapes, for
comparing `sframe dump` with the machine's `objdump --sframe` on code that gas
assembles now. Deterministic for a given seed.

Shapes: leaves, callers, recursion, alloca and variable-length arrays (CFA
from FP), frames of 4 KB and 70 KB (2- and 4-byte data words), varargs,
switch-heavy functions tens of KB long (2- and 4-byte FRE start addresses),
C++ exceptions, virtual calls, templates and lambdas.

Usage: genprog.py OUTDIR N_FUNCTIONS [SEED]
"""
import os
import random
import sys

out, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
os.makedirs(out, exist_ok=True)


def c_function(i):
    kind = rng.choice(["leaf", "call", "alloca", "vla", "big", "varargs", "loop", "rec"])
    callee = f"f{rng.randrange(i)}" if i > 0 else None
    if kind == "leaf" or callee is None:
        return f"__attribute__((noinline)) long f{i}(long x) {{ return x * {i + 3} + (x >> 3); }}\n"
    if kind == "call":
        return (f"__attribute__((noinline)) long f{i}(long x) {{ long a = {callee}(x + 1); "
                f"long b = {callee}(a ^ x); return a + b * {i}; }}\n")
    if kind == "alloca":
        return (f"__attribute__((noinline)) long f{i}(long x) {{ char *p = __builtin_alloca((x & 255) + 16); "
                f"p[0] = (char)x; sink(p); return {callee}(p[0]) + x; }}\n")
    if kind == "vla":
        return (f"__attribute__((noinline)) long f{i}(long x) {{ long n = (x & 63) + 1; long v[n]; "
                f"for (long k = 0; k < n; k++) v[k] = {callee}(k); sink(v); return v[n - 1]; }}\n")
    if kind == "big":
        size = rng.choice([4000, 70000])
        return (f"__attribute__((noinline)) long f{i}(long x) {{ volatile char buf[{size}]; buf[x & 1023] = 1; "
                f"sink((void *)buf); return {callee}(buf[3]) + buf[x & 511]; }}\n")
    if kind == "varargs":
        return (f"__attribute__((noinline)) long f{i}(long x, ...) {{ va_list ap; va_start(ap, x); "
                f"long s = 0; for (long k = 0; k < (x & 7); k++) s += va_arg(ap, long); va_end(ap); "
                f"return s + {callee}(s); }}\n")
    if kind == "loop":
        return (f"__attribute__((noinline)) long f{i}(long x) {{ long s = 0; for (long k = 0; k < x; k++) "
                f"{{ s += {callee}(k) ^ k; if (s > {i * 1000}) break; }} return s; }}\n")
    return (f"__attribute__((noinline)) long f{i}(long x) {{ if (x <= 0) return {callee}(1); "
            f"return f{i}(x - 1) + f{i}(x - 2) / 2; }}\n")


def c_long_function(name, cases):
    """A function of tens of KB: many switch arms, each with calls and its
    own epilogue, so late FREs need 2- or 4-byte start addresses."""
    body = [f"__attribute__((noinline)) long {name}(long x, long y) {{", "  switch (x) {"]
    for k in range(cases):
        body.append(f"  case {k}: {{ long t = f{k % 50}(y + {k}); if (t & {k | 1}) return t * {k + 7}; "
                    f"y = t ^ {k * 31}; sink(&y); break; }}")
    body += ["  default: break;", "  }", "  return y;", "}"]
    return "\n".join(body) + "\n"


with open(os.path.join(out, "many.c"), "w") as f:
    f.write("#include <stdarg.h>\nvoid sink(void *p);\n")
    f.write("__attribute__((noinline)) void sink(void *p) { __asm__ volatile(\"\" : : \"r\"(p) : \"memory\"); }\n")
    for i in range(n):
        f.write(c_function(i))
    f.write(c_long_function("huge2", 900))
    f.write(c_long_function("huge4", 3000))
    f.write("int main(int argc, char **argv) { (void)argv; long s = 0;\n")
    f.write(f"  for (int i = 0; i < argc; i++) s += f{n - 1}(i) + huge2(i, s) + huge4(i, s);\n")
    f.write("  return (int)(s & 1); }\n")

with open(os.path.join(out, "many.cpp"), "w") as f:
    f.write("#include <stdexcept>\n#include <string>\n#include <vector>\n#include <algorithm>\n#include <functional>\n")
    f.write("struct Base { virtual ~Base() = default; virtual long run(long) = 0; };\n")
    m = max(n // 3, 10)
    for i in range(m):
        kind = rng.choice(["virt", "throw", "tmpl", "lambda"])
        if kind == "virt":
            f.write(f"struct D{i} : Base {{ long run(long x) override {{ std::vector<long> v(x & 15, {i}); "
                    f"return (long)v.size() + x; }} }};\n")
            f.write(f"__attribute__((noinline)) long g{i}(long x) {{ D{i} d; Base &b = d; return b.run(x); }}\n")
        elif kind == "throw":
            f.write(f"__attribute__((noinline)) long g{i}(long x) {{ try {{ if (x & 1) throw std::runtime_error"
                    f"(std::to_string(x)); return x; }} catch (const std::exception &e) {{ return (long)e.what()[0]; }} }}\n")
        elif kind == "tmpl":
            f.write(f"template <class T> __attribute__((noinline)) T t{i}(T x) {{ std::vector<T> v; "
                    f"for (T k = 0; k < (x & 7); ++k) v.push_back(k * {i}); std::sort(v.begin(), v.end()); "
                    f"return v.empty() ? x : v.back(); }}\n")
            f.write(f"__attribute__((noinline)) long g{i}(long x) {{ return t{i}<long>(x) + t{i}<int>((int)x); }}\n")
        else:
            f.write(f"__attribute__((noinline)) long g{i}(long x) {{ std::function<long(long)> fn = "
                    f"[x](long y) {{ return y * x + {i}; }}; return fn(x + 1); }}\n")
    f.write("int main(int argc, char **) { long s = 0;\n")
    for i in range(m):
        f.write(f"  s += g{i}(argc + {i});\n")
    f.write("  return (int)(s & 1); }\n")
