// SPDX-License-Identifier: MIT
// An absolute address in .text: linked with -z notext, the module gets
// DT_TEXTREL (the dynamic linker writes into its read-only segment), so
// none of its .eh_frame pages may be released (page_release_test.cpp).
int text_reloc_global = 5;
__asm__(".pushsection .text\n.p2align 3\n.globl text_reloc_ptr\ntext_reloc_ptr: .quad text_reloc_global\n.popsection");
