// CUDA API names HIP has no equivalent of, and a deprecated one: kept, commented, reported; written for
// porter's tests.
#include <hip/hip_runtime.h>

#define FLUSH_RDMA() cudaDeviceFlushGPUDirectRDMAWrites /* porter: cudaDeviceFlushGPUDirectRDMAWrites has no HIP equivalent (HIP 5.2) */(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice /* porter: cudaFlushGPUDirectRDMAWritesTargetCurrentDevice has no HIP equivalent (HIP 5.2) */, \
                                                        cudaFlushGPUDirectRDMAWritesToOwner) // porter: cudaFlushGPUDirectRDMAWritesToOwner has no HIP equivalent (HIP 5.2)

int run_unmapped(hipArray_t array, const float* host) {
    hipStream_t s;
    hipStreamCreate(&s);
    cudaStreamAttrValue value; // porter: cudaStreamAttrValue has no HIP equivalent (HIP 5.2)
    cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &value);  // CUDA 11 // porter: cudaStreamGetAttribute has no HIP equivalent (HIP 5.2); cudaStreamAttributeAccessPolicyWindow has no HIP equivalent (HIP 5.2)
    FLUSH_RDMA();
    hipMemcpyToArray(array, 0, 0, host, 16, hipMemcpyHostToDevice);
    int id = cudaInitDevice(0, 0, 0); /* CUDA 12 */ // porter: cudaInitDevice has no HIP equivalent (HIP 5.2)
    return id;
}

// CUDA 12/13 forms of calls HIP 5.2 has only in their older form
void changed_forms(hipGraphExec_t e, hipGraph_t g, hipGraphNode_t a, hipGraphNode_t b,
                   const cudaGraphEdgeData* edge, float* p, hipStream_t s) { // porter: cudaGraphEdgeData has no HIP equivalent (HIP 5.2)
    cudaGraphExecUpdateResultInfo info; // porter: cudaGraphExecUpdateResultInfo has no HIP equivalent (HIP 5.2)
    cudaGraphExecUpdate(e, g, &info); // porter: cudaGraphExecUpdate with 3 arguments has no HIP equivalent (HIP 5.2)
    cudaGraphAddDependencies(g, &a, &b, edge, 1); // porter: cudaGraphAddDependencies with 5 arguments has no HIP equivalent (HIP 5.2)
    hipMemLocation where{};
    cudaMemPrefetchAsync(p, 64, where, 0, s); // porter: cudaMemPrefetchAsync with 5 arguments has no HIP equivalent (HIP 5.2)
}
