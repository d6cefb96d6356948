// NVRTC declares size_t; the rest of <stddef.h> for device code.
#pragma once
typedef long long ptrdiff_t;
#ifndef NULL
#define NULL 0
#endif
