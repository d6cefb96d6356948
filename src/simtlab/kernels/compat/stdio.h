// NVRTC declares printf itself (device printf); nothing else of <stdio.h> exists on the device.
#pragma once
