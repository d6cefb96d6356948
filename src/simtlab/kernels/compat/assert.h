// NVRTC declares assert itself (device assert).
#pragma once
