// NVRTC declares malloc, free and abs for device code itself.
#pragma once
