// CUDA graph calls in the forms CUDA 12 and 13 changed (the CUDA Runtime API reference's signatures):
// cudaGraphInstantiate with flags, cudaStreamGetCaptureInfo with the old _v2 arguments, and the
// dependency calls with CUDA 13's edge data left null.  Written for porter's tests.
#include <cuda_runtime.h>

#define INSTANTIATE(exec, graph) cudaGraphInstantiate(&(exec), (graph), 0)

__global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

int captured_nodes(float* x, int n) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaGraph_t g;
    cudaGraphExec_t e, e2, e3;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    scale<<<(n + 255) / 256, 256, 0, s>>>(x, 2.0f, n);
    cudaStreamCaptureStatus status;
    unsigned long long id = 0;
    cudaGraph_t capturing;
    const cudaGraphNode_t* deps = nullptr;
    size_t ndeps = 0;
    cudaStreamGetCaptureInfo(s, &status);
    cudaStreamGetCaptureInfo(s, &status, &id, &capturing, &deps, nullptr, &ndeps);
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&e, g, cudaGraphInstantiateFlagAutoFreeOnLaunch);
    cudaGraphInstantiate(&e2, g);
    INSTANTIATE(e3, g);
    cudaGraphLaunch(e, s);
    cudaStreamSynchronize(s);

    cudaGraph_t h;
    cudaGraphCreate(&h, 0);
    cudaGraphNode_t first, second;
    cudaGraphAddEmptyNode(&first, h, nullptr, 0);
    cudaGraphAddEmptyNode(&second, h, nullptr, 0);
    cudaGraphAddDependencies(h, &first, &second, NULL, 1);
    size_t edges = 0;
    cudaGraphGetEdges(h, nullptr, nullptr, nullptr, &edges);
    size_t before = 0, after = 0;
    cudaGraphNodeGetDependencies(second, nullptr, nullptr, &before);
    cudaGraphNodeGetDependentNodes(first, nullptr, nullptr, &after);
    cudaGraphRemoveDependencies(h, &first, &second, nullptr, 1);
    cudaGraphExecDestroy(e3);
    cudaGraphExecDestroy(e2);
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(h);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    return (int)(edges + before + after + ndeps) + (status == cudaStreamCaptureStatusActive ? 1 : 0);
}
