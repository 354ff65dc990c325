// CUDA graph calls in the forms CUDA 12 and 13 changed (the CUDA Runtime API reference's signatures):
// cudaGraphInstantiate with flags, cudaStreamGetCaptureInfo with the old _v2 arguments, and the
// dependency calls with CUDA 13's edge data left null.  Written for porter's tests.
#include <hip/hip_runtime.h>

#define INSTANTIATE(exec, graph) hipGraphInstantiateWithFlags(&(exec), (graph), 0)

__global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

int captured_nodes(float* x, int n) {
    hipStream_t s;
    hipStreamCreate(&s);
    hipGraph_t g;
    hipGraphExec_t e, e2, e3;
    hipStreamBeginCapture(s, hipStreamCaptureModeGlobal);
    hipLaunchKernelGGL(scale, (n + 255) / 256, 256, 0, s, x, 2.0f, n);
    hipStreamCaptureStatus status;
    unsigned long long id = 0;
    hipGraph_t capturing;
    const hipGraphNode_t* deps = nullptr;
    size_t ndeps = 0;
    hipStreamGetCaptureInfo_v2(s, &status);
    hipStreamGetCaptureInfo_v2(s, &status, &id, &capturing, &deps, &ndeps);
    hipStreamEndCapture(s, &g);
    hipGraphInstantiateWithFlags(&e, g, hipGraphInstantiateFlagAutoFreeOnLaunch);
    hipGraphInstantiateWithFlags(&e2, g, 0);
    INSTANTIATE(e3, g);
    hipGraphLaunch(e, s);
    hipStreamSynchronize(s);

    hipGraph_t h;
    hipGraphCreate(&h, 0);
    hipGraphNode_t first, second;
    hipGraphAddEmptyNode(&first, h, nullptr, 0);
    hipGraphAddEmptyNode(&second, h, nullptr, 0);
    hipGraphAddDependencies(h, &first, &second, 1);
    size_t edges = 0;
    hipGraphGetEdges(h, nullptr, nullptr, &edges);
    size_t before = 0, after = 0;
    hipGraphNodeGetDependencies(second, nullptr, &before);
    hipGraphNodeGetDependentNodes(first, nullptr, &after);
    hipGraphRemoveDependencies(h, &first, &second, 1);
    hipGraphExecDestroy(e3);
    hipGraphExecDestroy(e2);
    hipGraphExecDestroy(e);
    hipGraphDestroy(h);
    hipGraphDestroy(g);
    hipStreamDestroy(s);
    return (int)(edges + before + after + ndeps) + (status == hipStreamCaptureStatusActive ? 1 : 0);
}
