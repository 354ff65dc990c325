// CUDA API names HIP has no equivalent of, and a deprecated one: kept, commented, reported; written for
// porter's tests.
#include <cuda_runtime.h>

#define FLUSH_RDMA() cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice, \
                                                        cudaFlushGPUDirectRDMAWritesToOwner)

int run_unmapped(cudaArray_t array, const float* host) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaStreamAttrValue value;
    cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &value);  // CUDA 11
    FLUSH_RDMA();
    cudaMemcpyToArray(array, 0, 0, host, 16, cudaMemcpyHostToDevice);
    int id = cudaInitDevice(0, 0, 0); /* CUDA 12 */
    return id;
}

// CUDA 12/13 forms of calls HIP 5.2 has only in their older form
void changed_forms(cudaGraphExec_t e, cudaGraph_t g, cudaGraphNode_t a, cudaGraphNode_t b,
                   const cudaGraphEdgeData* edge, float* p, cudaStream_t s) {
    cudaGraphExecUpdateResultInfo info;
    cudaGraphExecUpdate(e, g, &info);
    cudaGraphAddDependencies(g, &a, &b, edge, 1);
    cudaMemLocation where{};
    cudaMemPrefetchAsync(p, 64, where, 0, s);
}
