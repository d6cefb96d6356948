// NVRTC declares memcpy, memset, malloc, free for device code itself.
#pragma once
