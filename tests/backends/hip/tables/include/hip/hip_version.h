// a stand-in for HIP's hip_version.h, written for porter's generator test
#define HIP_VERSION_MAJOR 5
#define HIP_VERSION_MINOR 2
#define HIP_VERSION_PATCH 7
