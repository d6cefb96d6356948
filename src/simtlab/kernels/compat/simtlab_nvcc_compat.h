// What a kernel written for nvcc finds through the host headers nvcc includes and NVRTC does not:
// the short unsigned type names of <sys/types.h>. Included before a user's source (simtlab.Kernel,
// `simtlab explain FILE`); NVRTC itself declares printf, assert, size_t, min/max and the math
// functions, and this folder's <cstdio>, <cstdint>, <cmath>, <climits>, <cfloat> ... let their
// #include lines resolve.
#pragma once
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long ulong;
