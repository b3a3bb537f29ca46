// SPDX-License-Identifier: MIT
// 900 small functions, so that the module's .eh_frame (one FDE each) spans
// several pages: the page-release tests' modules (page_release_test.cpp).
#define F(n) int many_f##n(int x) { return x * (n + 3) + n; }
#define F10(n) F(n##0) F(n##1) F(n##2) F(n##3) F(n##4) F(n##5) F(n##6) F(n##7) F(n##8) F(n##9)
#define F100(n) F10(n##0) F10(n##1) F10(n##2) F10(n##3) F10(n##4) F10(n##5) F10(n##6) F10(n##7) F10(n##8) F10(n##9)
F100(1) F100(2) F100(3) F100(4) F100(5) F100(6) F100(7) F100(8) F100(9)
